#include "trace/trace-hw_pvrdma.h"
