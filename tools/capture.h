/* capture.h - `mlprof capture` (capture.c), called by the mlprof command's main. */
#ifndef MLPROF_TOOLS_CAPTURE_H
#define MLPROF_TOOLS_CAPTURE_H

/* argv[0] is "capture"; returns the exit status (see its --help). */
int mlprof_cmd_capture(int argc, char **argv);

#endif
