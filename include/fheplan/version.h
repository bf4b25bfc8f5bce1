/* fheplan/version.h — the version of the headers, to compare with the library's
 * (fhr_version_number()) and detect header/library skew. */
#ifndef FHEPLAN_VERSION_H
#define FHEPLAN_VERSION_H

#include "fheplan/types.h"

#define FHEPLAN_VERSION_MAJOR 0
#define FHEPLAN_VERSION_MINOR 1
#define FHEPLAN_VERSION_PATCH 0
#define FHEPLAN_VERSION "0.1.0"
/* major * 1000000 + minor * 1000 + patch */
#define FHEPLAN_VERSION_NUMBER 1000

#ifdef __cplusplus
extern "C" {
#endif

/* The library's own version, as linked at run time. */
FHR_API int fhr_version_number(void);
FHR_API const char *fhr_version(void);

#ifdef __cplusplus
}
#endif
#endif
