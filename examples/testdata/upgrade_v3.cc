// Version 3 of the upgrade probe (upgrade_probe.h).
#define PROBE_VERSION 3
#include "upgrade_probe.h"
