/* cli/fheplan.c — the fheplan command: argument parsing, subcommand dispatch and exit
 * codes (0 ok, 1 rejected/failed, 2 unreadable input, 64 usage, 70 internal). */
#include <stdio.h>
#include <string.h>

static const char usage[] =
    "usage: fheplan COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  check FILE...        compile, verify and dry-run every stage against its budgets\n"
    "  run FILE             execute a plan (--device auto|cuda|emu)\n"
    "  compile FILE -o OUT  write verified bytecode\n"
    "  disasm FILE          show bytecode (or a plan) as text\n"
    "  version              print the version\n";

int main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "help") == 0 || strcmp(argv[1], "--help") == 0) {
        fputs(usage, argc < 2 ? stderr : stdout);
        return argc < 2 ? 64 : 0;
    }
    if (strcmp(argv[1], "version") == 0 || strcmp(argv[1], "--version") == 0) {
        puts("fheplan 0.1.0");
        return 0;
    }
    fprintf(stderr, "fheplan: '%s' is not available in this build\n%s", argv[1], usage);
    return 64;
}
