/* runtime/control/use.h — what the throttling layer may set on a use it began
 * (internal to runtime/control/). */
#ifndef FHEPLAN_RUNTIME_CONTROL_USE_H
#define FHEPLAN_RUNTIME_CONTROL_USE_H

#include "fheplan/controller.h"

/* The use takes ownership of d; waits is reported by fhr_use_report. */
void use_adopt_decision(fhr_use *u, fhr_decision *d, uint64_t waits);
/* The manager a controller decides for. */
fhr_manager *controller_manager(const fhr_controller *c);

#endif
