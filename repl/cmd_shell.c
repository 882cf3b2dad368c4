/* cmd_shell.c -- the front end's own commands: run, lua, echo, history, quit, exit. They go into
 * the one command table through cmd_register_group (shell_register), listed with the session
 * commands in `help`, so completion, `-e` and Lua see them like any other. */
#define _GNU_SOURCE
#include "cmd_shell.h"
#include "commands.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "exec.h"
#include "history.h"
#include "lua_shell.h"
#include "registry.h"
#include "shell.h"

/* ================================================================ scripts and Lua */

static const char RUN_HELP[] =
    "Runs a file: FILE.lua as a Lua notebook (module attn, global arg = { [0] = FILE }), any\n"
    "other file as commands, one line each (';' allowed, '#' starts a comment line). A failing\n"
    "command stops the file and is reported as FILE:LINE:. From Lua: attn.run_file(FILE).";

static int cmd_run(Session *s, const Args *a, Out *out) {
    const char *path = args_str(a, "file");
    size_t n = strlen(path);
    ShellState *st = shell_state(s);
    if (!st) return AL_ERR;
    if (st->depth >= 16) return al_err("run %s: files run each other more than 16 deep (a loop?)", path);
    struct stat sb;                        /* Lua's own "cannot open" read as no error of the shell's */
    if (stat(path, &sb) != 0) return al_err("run: cannot open '%s' (%s)", path, strerror(errno));
    st->depth++;
    int rc = n > 4 && !strcmp(path + n - 4, ".lua") ? shell_lua_file(s, path, 0, NULL, out)
                                                     : shell_run_commands_file(s, path, out);
    st->depth--;
    return rc;
}

static const char LUA_HELP[] =
    "Runs Lua code in the session's Lua state (Lua 5.4 with module attn). A bare expression\n"
    "prints its value: lua 2^10, = attn.run(\"models\")[1].name. attn.run(\"cmd ...\") runs any\n"
    "command line and returns its result (tables of rows keyed by column, arrays of numbers,\n"
    "numbers, strings); attn.<command>(positional..., {keyword = value}) calls one command,\n"
    "e.g. attn.load(\"demo-r1\"), attn.info(). A Lua error prints a traceback; the shell stays up.";

static int cmd_lua(Session *s, const Args *a, Out *out) {
    return shell_lua_exec(s, args_str(a, "code"), false, out);
}

static int cmd_echo(Session *s, const Args *a, Out *out) {
    (void)s;
    const char *text = args_str(a, "text");
    out_write(out, OUT_STDOUT, text, strlen(text));      /* what the script asked for: stdout in every format */
    out_write(out, OUT_STDOUT, "\n", 1);
    return AL_OK;
}

static int cmd_history(Session *s, const Args *a, Out *out) {
    (void)s;
    if (args_given(a, "to")) return shell_history_write(args_given(a, "n") ? args_int(a, "n") : 0, args_str(a, "to"), out);
    return shell_history_list(args_int(a, "n"), out);
}

static int cmd_quit(Session *s, const Args *a, Out *out) {
    (void)a; (void)out;
    ShellState *st = shell_state(s);
    if (st) st->want_exit = true;
    return AL_EXIT;
}

/* ================================================================ the table */

static const Param run_pos[] = {
    { .name = "file", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE", .help = "FILE.lua or a file of commands" },
    {0}
};
static const Param lua_pos[] = {
    { .name = "code", .type = ARG_STRING, .flags = PF_REST | PF_LINE, .comp = COMP_NONE, .metavar = "CODE...",
      .help = "Lua code (the rest of the line)" },
    {0}
};
static const Param echo_pos[] = {
    { .name = "text", .type = ARG_STRING, .def = "", .flags = PF_REST | PF_TEXT, .comp = COMP_NONE, .metavar = "TEXT...",
      .help = "text to print: the rest of the command, quoted as any argument (\"a  b\" prints a  b)" },
    {0}
};
static const Param history_pos[] = {
    { .name = "n", .type = ARG_INT, .def = "20", .min = 0, .max = 1e9, .comp = COMP_NONE, .metavar = "N",
      .help = "how many recent entries (0: all)" },
    {0}
};

static const Param history_kw[] = {
    { .name = "to", .type = ARG_PATH, .comp = COMP_FILES, .metavar = "FILE",
      .help = "write this session's commands (the last N with N) to FILE, one a line, for run FILE" },
    {0}
};

static const Command shell_cmds[] = {
    { .name = "run", .summary = "run FILE.lua or a file of commands", .help = RUN_HELP, .pos = run_pos,
      .fn = cmd_run, .lua_name = "run_file" },
    { .name = "lua", .summary = "run Lua code (also: '= expr' prints an expression)", .help = LUA_HELP,
      .pos = lua_pos, .fn = cmd_lua },
    { .name = "echo", .summary = "print the rest of the command",
      .help = "Prints its text (for scripts): the rest of the command up to an unquoted ';', its quotes read\n"
              "as in any argument -- \"...\" and '...' removed, \"...\"'s \\n \\t \\\" \\\\ escapes applied -- and\n"
              "the blanks between words kept.\n"
              "Examples:\n"
              "  echo \"a b\"; echo 'say \"hi\"'\n"
              "  echo \"two\\nlines\"",
      .pos = echo_pos, .fn = cmd_echo },
    { .name = "history", .summary = "show recent command lines",
      .help = "The prompt's history, kept across sessions in the history file of attnlab's\n"
              "home folder ($ATTNLAB_HOME or ~/.config/attnlab); lines of piped input and -e count\n"
              "for the session. `history to FILE` writes this session's command lines (no numbers,\n"
              "without `history` itself) as a file `run FILE` replays; `save session FILE` writes\n"
              "the state instead (models, settings, transformations).",
      .pos = history_pos, .kw = history_kw, .fn = cmd_history },
    { .name = "quit", .summary = "leave attnlab (also Ctrl-D)",
      .help = "Ends the session. Not available from Lua (use os.exit there).", .fn = cmd_quit,
      .flags = CMD_NOLUA },
    { .name = "exit", .summary = "same as quit", .help = "Ends the session, like quit.", .fn = cmd_quit,
      .flags = CMD_NOLUA },
    {0}
};

/* Same title as the base group of commands/: `help` lists these right after set. */
static const CommandGroup shell_group = { .title = "Models and session", .cmds = shell_cmds };

int shell_register(void) { return commands_init() != AL_OK ? AL_ERR : cmd_register_group(&shell_group); }
