/* cli/cli.h — the shared core of the fheplan command, for cli/main.c and every subcommand:
 * the parsed command line, its option parsers, loading a plan, one VM run, the output. */
#ifndef FHEPLAN_CLI_CLI_H
#define FHEPLAN_CLI_CLI_H

#include "fheplan/residency.h"
#include "fheplan/rplan.h"
#include "fheplan/vm.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Exit codes: 0 ok / feasible, 1 rejected / failed, 2 unreadable input, 64 usage, 70
 * internal error. Diagnostics go to stderr as "file:line:col: error: message", the source
 * line and a caret; --json puts one JSON document on stdout and nothing else there; colour
 * only on a TTY and never with NO_COLOR set. See fheplan(1). */
enum { EX_OK = 0, EX_FAIL = 1, EX_NOINPUT_ = 2, EX_USAGE_ = 64, EX_SOFTWARE_ = 70 };

/* The model backend check dry-runs on: every device a plan may name (cuda:0..cuda:61)
 * exists; run refuses a location beyond the devices it has (fheplan(1)). */
#define CHECK_DEVICES "model:62"

typedef struct cli {
    int colour;      /* stderr colour */
    int json;
    fhr_budget budgets[16];
    size_t nbudgets;
    const char *device;
    uint64_t scale;  /* 0: automatic */
    const char *trace;
    int quiet;
    int no_source;
    const char *out;
    const char **files;
    size_t nfiles;
    int policy;          /* 0 as written, else an rplan_policy_kind for every policy */
    int prefetch_set;
    unsigned prefetch;   /* --prefetch N (0: serial) */
    int objective;       /* --objective: an rplan_vm_objective (0: bytes) */
    int objective_set;   /* --objective given: check prints the modelled timeline */
    double pinned_gbps, device_gbps, gen_gbps, peer_gbps;
    int has_min_budget;
    fhr_location min_budget;
    uint32_t rank, world_size; /* the plan's rank constants (check --world-size, MPI) */
    int fmt_check, fmt_write;  /* fmt --check, fmt -w */
    int sarif;                 /* check --sarif */
    const char *timeline;      /* run --timeline FILE.html */
    const char *profile_out;   /* run --profile-out FILE */
    unsigned repeat;           /* run --repeat N (0, 1: once) */
    rplan_kernel_profile *profile; /* check/run --profile FILE, read */
    size_t nprofile;
    const char *warn_off[8];   /* -Wno-NAME: warnings not reported (rplan_compile_opts) */
    size_t nwarn_off;
    int warn_error;            /* -Werror */
} cli;

/* ---- the command line (cli/options.c) ------------------------------------------- */

extern const char usage_text[];
/* The subcommand whose usage usage() prints (NULL: all of them). */
extern const char *usage_cmd;
/* The usage of one subcommand (check, run, compile, disasm), else the full text. */
const char *usage_of(const char *cmd);
/* Prints "fheplan: " fmt (with arg) when fmt is set, then the usage, on stderr; returns
 * EX_USAGE_. */
int usage(const char *fmt, const char *arg);
/* 1 when stderr is a TTY, NO_COLOR is unset or empty and TERM is not "dumb". */
int want_colour(void);
/* Decimal digits only, in lo..hi (no sign, no space, no overflow). 0, or -1. */
int parse_count(const char *arg, uint64_t lo, uint64_t hi, uint64_t *out);
/* A RATE option (base/units.h's grammar) into *out: 0, or usage()'s EX_USAGE_ with
 * "bad OPT 'ARG' (why)" printed. */
int parse_rate_option(const char *opt, const char *arg, double *out);
/* The FHEPLAN_* variables that hold numbers (rates, FHEPLAN_EMU_MEMORY), read by the same
 * grammar as the options: 0, or EX_USAGE_ with the variable named on stderr. */
int check_environment(void);
/* 0 when spec is a documented --device: auto, cuda, emu or emu:N (N 1..62). */
int check_device(const char *spec);
/* The values of --budget, --scale, --policy, --objective, --prefetch and --world-size, into c (or
 * *out). 0, or usage()'s EX_USAGE_ with the message printed. */
int parse_budget(cli *c, const char *arg);
int parse_scale(cli *c, const char *arg);
int parse_policy(cli *c, const char *arg);
int parse_objective(cli *c, const char *arg);
int parse_uint(const char *arg, const char *opt, unsigned *out);
int parse_world_size(cli *c, const char *arg);
/* -Werror, -Wno-error, -Wno-NAME, -WNAME (NAME: unused or unused-constant, -value,
 * -policy, -budget). 0, or usage()'s EX_USAGE_. */
int parse_warning(cli *c, const char *arg);

/* ---- a plan file (cli/input.c) -------------------------------------------------- */

/* Frees the copy of standard input that every load of "-" shares (main, at the end). */
void input_stdin_release(void);

typedef struct input {
    const char *path;
    char *text;      /* the source text (for carets), or NULL */
    size_t len;
    rplan_program *p;
    rplan_diags *d;
    char error[512]; /* why the file could not be read, when it could not */
    int compiled;    /* p was compiled from text here (not loaded from bytecode) */
} input;

void input_free(input *in);
/* The name reports give a FILE: "<stdin>" for "-" (as the diagnostics say), else path. */
const char *input_name(const char *path);
/* Loads source or bytecode. Returns 0, or an exit code (diagnostics printed unless
 * quiet_diags, in which case they stay in in->d for JSON). */
int load_input(const cli *c, const char *path, input *in, int quiet_diags);
/* Creates a VM for in's program on b and runs it; *vm_out (to destroy) and *rep (to
 * free) are set. A failure is shown at its source line unless --json. A VM that cannot
 * be made gives a refused report (rep->refused) and no VM. Returns EX_OK when the report
 * says ok, else an exit code. */
int run_vm(const cli *c, input *in, fhr_backend *b, rplan_vm_opts *o, rplan_vm **vm_out,
           rplan_vm_report **rep);

/* ---- output (cli/output.c) ------------------------------------------------------ */

/* An output path (compile -o, run --trace) that must not be an input FILE: the same
 * file by any spelling or link is refused (usage()'s EX_USAGE_), and so is one that is a
 * directory or neither a regular file, a character device nor a FIFO; else 0. */
int check_output(const cli *c, const char *out, const char *opt);
/* Writes len bytes to path ("-": stdout). A regular file (or none yet) is written
 * atomically: a temporary file beside it, then rename, so a failure leaves the old file
 * (or none); through a symbolic link, the file it names is so replaced and the link kept.
 * A character device or FIFO is opened and written through, never replaced; a directory
 * or another kind of file is refused. 0, or -1 with errno set. */
int write_atomic(const char *path, const void *buf, size_t len);
/* 1 when two output paths name one file (by spelling, or by any link when both exist). */
int same_output(const char *a, const char *b);
/* The diagnostics as a JSON array of {"severity", "file", "line", "col", "end_line",
 * "end_col" (one past the span), "message", "rule" (errors and warnings)}. */
cJSON *diags_json(const rplan_diags *d);
/* An input's diagnostics: its compiler's, or the reason it could not be read. */
cJSON *input_diags_json(const input *in);
/* Where print_json writes: NULL for stdout, or a buffer while one MPI rank or world-size
 * check collects its document (world_run, world_check). */
extern FILE *json_out;
void print_json(cJSON *o);

/* One stage's (or the total's) report as text on stdout: explain's or run's form. */
void print_stage(const rplan_stage_report *r, int explain, int is_total);

#endif
