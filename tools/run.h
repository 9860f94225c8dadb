/* run.h - `mlprof run` (run.c), called by the mlprof command's main. */
#ifndef MLPROF_TOOLS_RUN_H
#define MLPROF_TOOLS_RUN_H

/* argv[0] is "run"; returns the exit status of the command. */
int mlprof_cmd_run(int argc, char **argv);

#endif
