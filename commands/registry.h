/* registry.h -- the one command table behind the REPL, `attnlab -e`, `help`, tab completion and
 * the Lua module `attn`; the line parser that checks every argument against it; the dispatcher.
 *
 * Commands live in group files commands/cmd_<group>.c. Each defines
 *     const CommandGroup cmd_group_<group> = { .title = "...", .cmds = cmd_<group>_table };
 * with cmd_<group>_table an array of Command terminated by an empty entry {0}, and commands.c
 * lists the groups of commands/ in ONE place (add one line there: `&cmd_group_<group>,`);
 * commands_init() registers them. A front end adds its own groups after that with
 * cmd_register_group() (repl/: run, lua, history, quit). The registry itself names no group.
 *
 * A Command (designated initializers):
 *     static const Param ranks_pos[] = {
 *         { .name = "kind", .type = ARG_ENUM, .choices = KIND_CHOICES, .comp = COMP_CHOICES,
 *           .help = "which fused pair: vo (W_V W_O) or qk (W_Q W_K^T)" },
 *         {0} };
 *     static const Param ranks_kw[] = {
 *         { .name = "layer", .type = ARG_INT, .flags = PF_ALL, .def = "all", .comp = COMP_LAYERS,
 *           .help = "layer number, or all" },
 *         { .name = "tau", .type = ARG_FLOAT, .comp = COMP_NONE, .help = "energy threshold (default: set tau)" },
 *         PARAM_TO,
 *         {0} };
 *     const Command cmd_farr_table[] = {
 *         { .name = "ranks", .summary = "effective ranks of V, O and fused VO per head",
 *           .help = RANKS_HELP, .pos = ranks_pos, .kw = ranks_kw, .fn = cmd_ranks,
 *           .flags = CMD_MODEL },
 *         {0} };
 *
 * A command with sub-commands (`plot spectrum ...`, `convert mla ...`) sets .sub to its own
 * Command table (terminated by {0}) and has no .fn; the word after the name picks the sub-command
 * (from Lua: the first positional argument, attn.plot("vo-ranks", {layer=8})).
 *
 * Parsing is separate from dispatch: cmd_parse() turns a line into Args, checking arity, types,
 * enum choices, ranges, layer/head bounds of the current model and duplicate keywords, and on
 * error reports the byte column of the offending token so the front end can draw a caret:
 *     attnlab> ranks vo lyer 8
 *                       ^--- unknown keyword 'lyer' (did you mean 'layer'?)
 * Handlers then read typed values (args_int, args_float, args_str, ...) and never re-check them.
 *
 * Handler contract: int cmd_x(Session *s, const Args *a, Out *out) returns AL_OK, AL_ERR (with
 * al_err() set), AL_EXIT (quit) or AL_INTERRUPTED (Ctrl-C: al_interrupted() became true; keep
 * partial results). Text via out_printf, results via out_table_to / out_array / ... (out.h).
 * Long loops poll al_interrupted() between heads/layers and call al_progress().
 *
 * tests/test_registry.c walks every group (cmd_validate): each command and sub-command needs a
 * summary, long help, a handler or sub-commands, and each parameter a help line, a completion
 * hint and a default that parses; each top-level command gets attn.<name> in Lua (name with '-'
 * -> '_', or .lua_name). */
#ifndef AL_REGISTRY_H
#define AL_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include "al.h"
#include "out.h"

typedef struct Session Session;
typedef struct Args Args;
typedef struct Command Command;

/* ================================================================ parameters */

typedef enum {
    ARG_STRING,    /* any word (quoted for spaces) */
    ARG_PATH,      /* a file or folder path (quoted for spaces); completes file names */
    ARG_INT,       /* integer (long); with PF_ALL also the word `all` */
    ARG_FLOAT,     /* number (double) */
    ARG_ENUM,      /* one of .choices (a NULL-terminated list) */
    ARG_RANGE,     /* "A-B", "A", or `all`: inclusive integer range (lo, hi); all -> lo=0, hi=-1 */
    ARG_FLAG       /* keyword only, no value: present or not (`force`) */
} arg_type;

/* Completion hint: what tab offers for the parameter's value. Every parameter needs one
 * (COMP_NONE is an explicit "free text, nothing to offer"). */
typedef enum {
    COMP_UNSET = 0,  /* not filled in: the table test fails on it */
    COMP_NONE,       /* free text / numbers: no candidates */
    COMP_CHOICES,    /* the enum's .choices */
    COMP_MODELS,     /* names of loaded models */
    COMP_LOADABLE,   /* demo names, aliases, and file paths (for `load`) */
    COMP_LAYERS,     /* layer numbers of the current model (and `all` with PF_ALL / ARG_RANGE);
                        the parser also checks the value against the model's layer count */
    COMP_HEADS,      /* query-head numbers of the current model (checked like COMP_LAYERS) */
    COMP_FILES,      /* file paths: exactly the ARG_PATH parameters (cmd_validate checks it); tab
                        offers file names nowhere else (but `load` and `set plot.dir`) */
    COMP_COMMANDS,   /* command names (for `help`) */
    COMP_SETTINGS    /* setting names (for `set`) */
} comp_hint;

enum {
    PF_ALL = 1 << 0,   /* ARG_INT: also accepts the word `all` (ArgVal.all) */
    PF_REST = 1 << 1,  /* last positional ARG_STRING: takes the rest of the command verbatim, up to
                          an unquoted ';' (`echo TEXT`) */
    PF_LINE = 1 << 2,  /* with PF_REST: the rest of the whole line, ';' included (`lua CODE`) */
    PF_VIEW = 1 << 3,  /* only shapes how the result is shown (row order): no parameter of the
                          result, so `set csv.params on` leaves it out of the CSV columns */
    PF_OPEN_MIN = 1 << 4,  /* ARG_FLOAT: min itself is out of range, (min, max] (tau) */
    PF_TEXT = 1 << 5,      /* with PF_REST: the rest is text, quoted as any word is -- quotes removed, "..."'s
                              escapes applied -- with the blanks between words kept (`echo TEXT`); without
                              it the rest stays verbatim for a command that parses it again (`replot`) */
    PF_TABLE_TO = 1 << 6   /* a table's `to FILE` (PARAM_TO): cmd_dispatch checks its extension and the write
                              guard before the command runs, not after its work */
};

typedef struct Param {
    const char *name;              /* keyword as typed (`layer`), or the positional's name */
    arg_type type;
    const char *const *choices;    /* ARG_ENUM: NULL-terminated */
    const char *def;               /* default as the user would type it; NULL: none (a positional
                                      without default is required; a keyword without one is absent).
                                      "" on a string/path positional: optional, no value (args_given
                                      tells whether it was typed) */
    comp_hint comp;
    int flags;                     /* PF_* */
    double min, max;               /* ARG_INT / ARG_FLOAT bounds, checked when min < max */
    const char *metavar;           /* value placeholder in usage lines ("N", "FILE"); NULL: derived */
    const char *help;              /* one line for `help CMD` */
} Param;

/* The standard `to FILE` keyword of table commands (see out_table_to). */
#define PARAM_TO { .name = "to", .type = ARG_PATH, .flags = PF_TABLE_TO, .comp = COMP_FILES, .metavar = "FILE", \
                   .help = "write the table to FILE.csv or FILE.json instead of printing it (a missing folder is " \
                           "made inside the working directory only)" }

/* ================================================================ commands */

typedef int (*cmd_fn)(Session *s, const Args *a, Out *out);

enum {
    CMD_MODEL = 1 << 0,    /* needs a current model (checked before the handler runs) */
    CMD_NOLUA = 1 << 1     /* its Lua binding raises an error (e.g. `quit` inside a notebook) */
};

struct Command {
    const char *name;          /* the word typed; may contain '-' (Lua name uses '_') */
    const char *summary;       /* one line for `help` */
    const char *help;          /* long help for `help CMD` (paragraphs; no usage line: generated) */
    const Param *pos;          /* positional parameters, {0}-terminated (NULL: none) */
    const Param *kw;           /* keyword parameters, {0}-terminated (NULL: none) */
    const Command *sub;        /* sub-command table, {0}-terminated (then .fn is NULL) */
    cmd_fn fn;
    int flags;                 /* CMD_* */
    const char *lua_name;      /* top level only: the attn.<name> function when the command's own
                                  name cannot be used (NULL: name with '-' -> '_') */
    const char *returns;       /* what attn.<name>(...) returns, printed by `help CMD` as
                                  "returns (Lua): ..."; a sub-command without one has its parent's;
                                  NULL: .help says it (or the command returns nothing) */
};

/* .returns of a command whose result is a table (out.h). */
#define CMD_RETURNS_ROWS "the table's rows, one Lua table per row keyed by column name"

typedef struct CommandGroup {
    const char *title;         /* heading in `help` ("Models and session", "FaRR", ...) */
    const Command *cmds;       /* {0}-terminated */
} CommandGroup;

/* Adds a group at start-up: commands_init() (commands.h) adds commands/'s own, then the front end
 * its own (repl/ adds run, lua, echo, history, quit, exit; tests add theirs). In `help` order a
 * group follows the first group whose title it shares (its commands extend that heading), else
 * it comes in the order added. Adding the same group twice is a no-op; a command name already in
 * the table is an error. */
int cmd_register_group(const CommandGroup *g);

/* Top-level command by name (NULL if none). */
const Command *cmd_find(const char *name);
/* Sub-command of c by name (NULL if none). */
const Command *cmd_find_sub(const Command *c, const char *name);
/* Keyword / positional parameter by name (NULL if none). */
const Param *cmd_find_kw(const Command *c, const char *name);
/* Iterates all top-level commands: the i-th one, NULL past the end. */
const Command *cmd_at(size_t i, const CommandGroup **group);

/* ================================================================ parsed arguments */

#define ARGS_MAX 32          /* every figure has 8 more keywords: the overrides of params.h PARAM_PLOT_VIEW */
#define ARGS_TOKENS_MAX 64

typedef struct ArgVal {
    const Param *p;
    bool given;               /* typed by the user (false: filled from the default) */
    bool present;             /* given or defaulted: the value fields below are valid */
    const char *s;            /* the text (unquoted), owned by the Args */
    long i;                   /* ARG_INT, ARG_RANGE lo */
    long hi;                  /* ARG_RANGE hi (-1 with all) */
    double f;                 /* ARG_FLOAT (also set for ARG_INT) */
    int choice;               /* ARG_ENUM: index into choices */
    bool all;                 /* `all` given (ARG_RANGE, PF_ALL ints) */
    size_t col;               /* byte column of the token in the line (for messages) */
} ArgVal;

struct Args {
    const Command *cmd;       /* the leaf command that runs */
    const Command *top;       /* the top-level command (== cmd when there are no sub-commands) */
    char path[64];            /* "plot spectrum" */
    size_t npos, nkw;
    ArgVal pos[ARGS_MAX];     /* one per declared positional (present or not) */
    ArgVal kw[ARGS_MAX];      /* one per declared keyword */
    char *strs[ARGS_TOKENS_MAX + 2 * ARGS_MAX]; /* owned strings */
    size_t nstrs;
};

/* Typed access by parameter name (positional or keyword). A name the command does not declare
 * is a programming error: builds with ATTNLAB_ARG_CHECKS (Debug and ATTNLAB_SANITIZE builds, set
 * by CMake) abort naming the command and the argument; release builds return the zero value. */
bool args_has(const Args *a, const char *name);      /* given or has a default */
bool args_given(const Args *a, const char *name);    /* typed by the user */
const char *args_str(const Args *a, const char *name);   /* NULL when absent */
long args_int(const Args *a, const char *name);
double args_float(const Args *a, const char *name);
/* ARG_ENUM: index into choices (-1 when absent); args_str gives the word. */
int args_enum(const Args *a, const char *name);
bool args_flag(const Args *a, const char *name);
/* `all` given for a PF_ALL int or a range. */
bool args_all(const Args *a, const char *name);
/* ARG_RANGE (or ARG_INT): inclusive [lo, hi] clipped to [0, n): `all` -> [0, n-1]. Returns
 * AL_ERR naming the parameter when the range falls outside [0, n). */
int args_range(const Args *a, const char *name, long n, long *lo, long *hi);
const ArgVal *args_val(const Args *a, const char *name);
void args_free(Args *a);   /* frees owned strings (not the Args itself); safe on a zeroed Args */

/* ================================================================ parsing */

typedef struct {
    char *text;               /* unquoted, owned */
    size_t col, len;          /* byte span in the line (including quotes) */
    bool quoted;
} Token;

typedef struct {
    Token tok[ARGS_TOKENS_MAX];
    size_t n;
    size_t end;               /* byte column just past the segment (for "missing ..." carets) */
} Tokens;

/* A parse error: message (also left in al_errmsg()) and the byte column to point at. */
typedef struct {
    size_t col;
    char msg[512];
} ParseErr;

void tokens_free(Tokens *t);
/* Splits line[from..] into one command's tokens up to an unquoted ';' or the end, and sets
 * *next to the position after the ';' (or strlen(line)). A line that starts with `=` and a
 * PF_REST | PF_LINE parameter take the rest of the line (';' included); a PF_REST parameter the
 * rest of the command.
 * Returns AL_ERR with e set on an unterminated quote or too many tokens. */
int cmd_tokenize(const char *line, size_t from, size_t *next, Tokens *t, ParseErr *e);
/* Parses tokens against the table into a (zero it first; args_free after). s may be NULL (no
 * model bounds checks). Empty token lists are an error the caller should avoid. */
int cmd_parse_tokens(Session *s, const Tokens *t, const char *line, Args *a, ParseErr *e);
/* Tokenize + parse a line holding ONE command. */
int cmd_parse(Session *s, const char *line, Args *a, ParseErr *e);

/* Usage line generated from the table: "ranks vo|qk [layer N|all] [tau X] [to FILE]"
 * (caller frees). For a command with sub-commands: "plot spectrum|vo-ranks|... ...". */
char *cmd_usage(const Command *c, const char *prefix);
/* Checks one table entry (and its sub-commands): summary, long help, a handler or sub-commands
 * (not both), every parameter with a help line and a completion hint, enum choices, defaults that
 * parse, no duplicate parameter names, COMP_FILES exactly on ARG_PATH, PF_REST only on a last string positional, required
 * positionals before optional ones. AL_ERR names the command and what is missing. */
int cmd_validate(const Command *c, const char *prefix);

/* A parameter's value placeholder: its metavar, or "vo|qk" for enums, "N", "X", "A-B|all", "FILE". */
void cmd_metavar(const Param *p, char *buf, size_t cap);

/* The command as a canonical line: its path, then the arguments the user typed, positionals in
 * order and keywords as `name value` (quoted where needed), e.g. "truncate vo rank 4 policy
 * model-max"; parsing it gives the same Args. Caller frees; NULL + error on failure. */
char *args_line(const Args *a);

/* ================================================================ dispatch */

/* Runs a parsed command: checks CMD_MODEL, clears the interrupt flag, calls the handler, then
 * (on success) the observer. Returns the handler's status (AL_ERR with al_errmsg set;
 * "interrupted" for AL_INTERRUPTED). */
int cmd_dispatch(Session *s, const Args *a, Out *out);
/* The innermost command being dispatched (NULL between commands): what a transformation records
 * as the command that made it. */
const Args *cmd_running(void);
/* One observer called after every command that succeeded (NULL: none); commands_init installs the
 * session's (it keeps the lines `save session` replays). */
typedef void (*cmd_observer_fn)(Session *s, const Args *a);
void cmd_set_observer(cmd_observer_fn fn);

/* ================================================================ completion (complete.c) */

typedef struct {
    char **v;                 /* candidates, owned */
    size_t n, cap;
    bool files;               /* also complete file names (front end uses its filename generator) */
} StrList;

void strlist_free(StrList *l);
int strlist_add(StrList *l, const char *s);
/* Candidates for the word that starts at byte `start` of `line` (the word is line[start, point)),
 * from the table: commands, sub-commands, keywords not yet used, enum choices, model names,
 * layer / head numbers, settings; sets out->files when file names fit there. Only candidates
 * starting with the partial word are returned. */
int cmd_complete(Session *s, const char *line, size_t start, size_t point, StrList *out);

#endif
