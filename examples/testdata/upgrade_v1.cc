// Version 1 of the upgrade probe (upgrade_probe.h).
#define PROBE_VERSION 1
#include "upgrade_probe.h"
