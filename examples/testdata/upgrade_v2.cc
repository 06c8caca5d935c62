// Version 2 of the upgrade probe (upgrade_probe.h).
#define PROBE_VERSION 2
#include "upgrade_probe.h"
