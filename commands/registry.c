/* registry.c -- the registered command groups (commands.c lists commands/'s own), table look-ups, typed
 * argument access, the tokenizer and the parser that checks every argument against the table,
 * generated usage lines, and the dispatcher. Completion from the table is in complete.c. */
#define _GNU_SOURCE
#include "registry.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"
#include "write_guard.h"

/* ================================================================ the groups */

/* The groups in the order registered (commands_init registers commands/'s own, in `help` order;
 * the front end adds its own after them). The registry lists no group itself, so the groups,
 * which include this file's header, sit above it. */
#define GROUPS_MAX 24
static const CommandGroup *groups[GROUPS_MAX];
static size_t ngroups;

/* The first registered group with g's title (g itself when it is the first). */
static const CommandGroup *title_leader(const CommandGroup *g) {
    for (size_t j = 0; j < ngroups; j++)
        if (!strcmp(groups[j]->title, g->title)) return groups[j];
    return g;
}

/* The k-th group in `help` order: groups in the order registered, each followed by the later ones
 * sharing its title (the front end's commands join the heading of commands/'s group). NULL past
 * the end. */
static const CommandGroup *group_at(size_t k) {
    for (size_t g = 0; g < ngroups; g++) {
        if (title_leader(groups[g]) != groups[g]) continue;
        for (size_t j = g; j < ngroups; j++)
            if (title_leader(groups[j]) == groups[g] && k-- == 0) return groups[j];
    }
    return NULL;
}

int cmd_register_group(const CommandGroup *g) {
    for (size_t j = 0; j < ngroups; j++)
        if (groups[j] == g) return AL_OK;
    if (ngroups >= GROUPS_MAX) return al_err("too many command groups (at most %d; raise GROUPS_MAX)", GROUPS_MAX);
    if (!g->title || !*g->title) return al_err("a command group needs a title");
    for (const Command *c = g->cmds; c && c->name; c++)
        if (cmd_find(c->name)) return al_err("command group '%s': '%s' is already a command", g->title, c->name);
    groups[ngroups++] = g;
    return AL_OK;
}

const Command *cmd_at(size_t i, const CommandGroup **group) {
    const CommandGroup *g;
    for (size_t k = 0; (g = group_at(k)); k++)
        for (const Command *c = g->cmds; c && c->name; c++)
            if (i-- == 0) {
                if (group) *group = g;
                return c;
            }
    return NULL;
}

const Command *cmd_find(const char *name) {
    const Command *c;
    for (size_t i = 0; (c = cmd_at(i, NULL)); i++)
        if (!strcmp(c->name, name)) return c;
    return NULL;
}

const Command *cmd_find_sub(const Command *c, const char *name) {
    for (const Command *s = c ? c->sub : NULL; s && s->name; s++)
        if (!strcmp(s->name, name)) return s;
    return NULL;
}

const Param *cmd_find_kw(const Command *c, const char *name) {
    for (const Param *p = c->kw; p && p->name; p++)
        if (!strcmp(p->name, name)) return p;
    for (const Param *p = c->pos; p && p->name; p++)
        if (!strcmp(p->name, name)) return p;
    return NULL;
}

/* Only the keyword list (the parser must not take a positional's name as a keyword). */
static const Param *find_keyword(const Command *c, const char *name) {
    for (const Param *p = c->kw; p && p->name; p++)
        if (!strcmp(p->name, name)) return p;
    return NULL;
}

static size_t nparams(const Param *p) {
    size_t n = 0;
    while (p && p[n].name) n++;
    return n;
}

/* ================================================================ typed access */

const ArgVal *args_val(const Args *a, const char *name) {
    for (size_t i = 0; i < a->nkw; i++)
        if (a->kw[i].p && !strcmp(a->kw[i].p->name, name)) return &a->kw[i];
    for (size_t i = 0; i < a->npos; i++)
        if (a->pos[i].p && !strcmp(a->pos[i].p->name, name)) return &a->pos[i];
#ifdef ATTNLAB_ARG_CHECKS
    /* a handler reading a name its table entry does not declare: a typo that would read as zero */
    fprintf(stderr, "attnlab: internal error: '%s' reads argument '%s', which it does not declare\n",
            a->path[0] ? a->path : "?", name);
    abort();
#endif
    return NULL;
}

bool args_has(const Args *a, const char *name) { const ArgVal *v = args_val(a, name); return v && v->present; }
bool args_given(const Args *a, const char *name) { const ArgVal *v = args_val(a, name); return v && v->given; }
const char *args_str(const Args *a, const char *name) {
    const ArgVal *v = args_val(a, name);
    return v && v->present ? v->s : NULL;
}
long args_int(const Args *a, const char *name) { const ArgVal *v = args_val(a, name); return v && v->present ? v->i : 0; }
double args_float(const Args *a, const char *name) { const ArgVal *v = args_val(a, name); return v && v->present ? v->f : 0; }
int args_enum(const Args *a, const char *name) { const ArgVal *v = args_val(a, name); return v && v->present ? v->choice : -1; }
bool args_flag(const Args *a, const char *name) { const ArgVal *v = args_val(a, name); return v && v->present; }
bool args_all(const Args *a, const char *name) { const ArgVal *v = args_val(a, name); return v && v->present && v->all; }

int args_range(const Args *a, const char *name, long n, long *lo, long *hi) {
    const ArgVal *v = args_val(a, name);
    if (!v || !v->present) return al_err("argument '%s' is missing", name);
    if (v->all) {
        if (n <= 0) return al_err("%s: nothing to range over (0 items)", name);
        *lo = 0; *hi = n - 1;
        return AL_OK;
    }
    long l = v->i, h = v->p->type == ARG_RANGE ? v->hi : v->i;
    if (l < 0 || h >= n || l > h)
        return al_err("%s %s is out of range: valid values are 0-%ld", name, v->s, n - 1);
    *lo = l; *hi = h;
    return AL_OK;
}

void args_free(Args *a) {
    for (size_t i = 0; i < a->nstrs; i++) free(a->strs[i]);
    a->nstrs = 0;
}

/* A copy owned by a (freed by args_free). */
static const char *args_keep(Args *a, const char *s) {
    if (a->nstrs >= sizeof a->strs / sizeof a->strs[0]) return NULL;
    char *c = strdup(s);
    if (c) a->strs[a->nstrs++] = c;
    return c;
}

/* ================================================================ edit distance, suggestions */

/* Suggestions ("did you mean") are out.h's suggester: out_suggest_try / out_suggest_text. */

/* ================================================================ tokenizer */

void tokens_free(Tokens *t) {
    for (size_t i = 0; i < t->n; i++) free(t->tok[i].text);
    t->n = 0;
}

static int perr(ParseErr *e, size_t col, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int perr(ParseErr *e, size_t col, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    e->col = col;
    al_err("%s", e->msg);
    return AL_ERR;
}

static int push_token(Tokens *t, const char *text, size_t len, size_t col, size_t span, bool quoted,
                      ParseErr *e) {
    if (t->n >= ARGS_TOKENS_MAX)
        return perr(e, col, "too many words in one command (at most %d)", ARGS_TOKENS_MAX);
    char *s = strndup(text, len);
    if (!s) return perr(e, col, "out of memory");
    t->tok[t->n++] = (Token){ .text = s, .col = col, .len = span, .quoted = quoted };
    return AL_OK;
}

/* In "...", a backslash before one of these is an escape: \" and \\ the character itself, \n a
 * newline, \t a tab (what `tokenize ... strings` prints for them); 0: not an escape, the backslash
 * stays in the word ("a\b" is a, backslash, b). args_line writes them back the same way. */
static char quoted_escape(char c) {
    return c == '"' || c == '\\' ? c : c == 'n' ? '\n' : c == 't' ? '\t' : 0;
}

/* line[i, n) as one token (blanks around it dropped). */
static int rest_token(const char *line, size_t i, size_t n, Tokens *t, ParseErr *e) {
    size_t end = n;
    while (i < n && isspace((unsigned char)line[i])) i++;
    while (end > i && isspace((unsigned char)line[end - 1])) end--;
    if (end > i) return push_token(t, line + i, end - i, i, end - i, false, e);
    return AL_OK;
}

/* Index of the PF_REST positional of a command without sub-commands, or -1; *flags: its flags
 * (PF_LINE: the whole line, ';' included; PF_TEXT: quotes read as in any word). */
static long rest_index(const Command *c, unsigned *flags) {
    if (!c || c->sub) return -1;
    for (size_t i = 0; c->pos && c->pos[i].name; i++)
        if (c->pos[i].flags & PF_REST) { *flags = c->pos[i].flags; return (long)i; }
    return -1;
}

/* Copies one quoted run line[*i] = q ... q of line[0, n) into word at *wl (escapes of "..." applied:
 * quoted_escape) and moves *i past its closing quote; false when it has none. */
static bool copy_quoted(const char *line, size_t *i, size_t n, char *word, size_t *wl) {
    size_t k = *i;
    char q = line[k++];
    while (k < n && line[k] != q) {
        if (q == '"' && line[k] == '\\' && k + 1 < n) {   /* quoted_escape: \" \\ \n \t */
            char c = quoted_escape(line[k + 1]);
            if (c) { word[(*wl)++] = c; k += 2; continue; }
        }
        word[(*wl)++] = line[k++];
    }
    *i = k < n ? k + 1 : n;
    return k < n;
}

static int unterminated(ParseErr *e, size_t col, char q) {
    return perr(e, col, "unterminated %s quote (close it with %c)", q == '"' ? "double" : "single", q);
}

/* line[i, j) as one token of text (PF_TEXT): quotes read as in any word, blanks outside them kept,
 * blanks around it dropped. */
static int rest_text_token(const char *line, size_t i, size_t j, char *word, Tokens *t, ParseErr *e) {
    while (i < j && isspace((unsigned char)line[i])) i++;
    while (j > i && isspace((unsigned char)line[j - 1])) j--;
    size_t wl = 0, start = i;
    bool quoted = false;
    while (i < j) {
        if (line[i] != '"' && line[i] != '\'') { word[wl++] = line[i++]; continue; }
        size_t qstart = i;
        quoted = true;
        if (!copy_quoted(line, &i, j, word, &wl)) return unterminated(e, qstart, line[qstart]);
    }
    return j > start ? push_token(t, word, wl, start, j - start, quoted, e) : AL_OK;
}

int cmd_tokenize(const char *line, size_t from, size_t *next, Tokens *t, ParseErr *e) {
    size_t n = strlen(line), i = from;
    t->n = 0;
    *next = n;
    while (i < n && isspace((unsigned char)line[i])) i++;
    if (i < n && line[i] == '=') {              /* "= expr": Lua, to the end of the line */
        if (push_token(t, "=", 1, i, 1, false, e)) return AL_ERR;
        t->end = n;
        return rest_token(line, i + 1, n, t, e);
    }
    char *word = malloc(n + 1);
    if (!word) return perr(e, i, "out of memory");
    long rest_at = -1;                          /* token index that takes the rest */
    unsigned rest_flags = 0;
    for (;;) {
        while (i < n && isspace((unsigned char)line[i])) i++;
        if (i >= n) break;
        if (line[i] == ';') { *next = i + 1; break; }
        if (rest_at >= 0 && (long)t->n == rest_at) {
            /* a PF_LINE parameter (`lua CODE`) takes the whole line; PF_REST the rest of the command */
            size_t j = i;
            if (!(rest_flags & PF_LINE)) {
                char q = 0;
                for (; j < n && (q || line[j] != ';'); j++)
                    if (q ? line[j] == q : (line[j] == '"' || line[j] == '\'')) q = q ? 0 : line[j];
            } else j = n;
            *next = j < n ? j + 1 : n;
            t->end = j;
            int rc = rest_flags & PF_TEXT ? rest_text_token(line, i, j, word, t, e) : rest_token(line, i, j, t, e);
            free(word);
            if (rc) tokens_free(t);
            return rc;
        }
        size_t start = i, wl = 0;
        bool quoted = false;
        while (i < n && !isspace((unsigned char)line[i]) && line[i] != ';') {
            char q = line[i];
            if (q == '"' || q == '\'') {
                size_t qstart = i;
                quoted = true;
                if (!copy_quoted(line, &i, n, word, &wl)) {
                    free(word);
                    tokens_free(t);
                    return unterminated(e, qstart, q);
                }
            } else word[wl++] = line[i++];
        }
        if (push_token(t, word, wl, start, i - start, quoted, e)) { free(word); tokens_free(t); return AL_ERR; }
        if (t->n == 1 && !quoted) {
            long r = rest_index(cmd_find(t->tok[0].text), &rest_flags);
            if (r >= 0) rest_at = 1 + r;
        }
    }
    t->end = t->n ? t->tok[t->n - 1].col + t->tok[t->n - 1].len + 1 : i;
    free(word);
    return AL_OK;
}

/* ================================================================ value conversion */

/* A placeholder for a parameter's value in messages and usage lines ("N", "vo|qk", "A-B|all"). */
void cmd_metavar(const Param *p, char *buf, size_t cap) {
    if (p->metavar) { snprintf(buf, cap, "%s", p->metavar); return; }
    switch (p->type) {
    case ARG_ENUM: {
        size_t n = 0;
        buf[0] = 0;
        for (size_t i = 0; p->choices && p->choices[i]; i++)
            n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", i ? "|" : "", p->choices[i]);
        return;
    }
    case ARG_INT: snprintf(buf, cap, (p->flags & PF_ALL) ? "N|all" : "N"); return;
    case ARG_FLOAT: snprintf(buf, cap, "X"); return;
    case ARG_RANGE: snprintf(buf, cap, "A-B|all"); return;
    case ARG_PATH: snprintf(buf, cap, "FILE"); return;
    case ARG_FLAG: buf[0] = 0; return;
    case ARG_STRING: {
        size_t k = 0;
        for (; p->name[k] && k + 1 < cap; k++) buf[k] = (char)toupper((unsigned char)p->name[k]);
        buf[k] = 0;
        return;
    }
    }
}

static bool parse_long(const char *s, long *v) {
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (!*s || *end || errno) return false;
    *v = x;
    return true;
}

/* ARG_INT: a whole number within the parameter's bounds, or `all` where PF_ALL allows it. */
static bool convert_int(const Param *p, const char *text, ArgVal *v, char *why, size_t cap) {
    if ((p->flags & PF_ALL) && !strcmp(text, "all")) { v->all = true; v->i = -1; v->f = -1; return true; }
    if (!parse_long(text, &v->i)) {
        snprintf(why, cap, "%s wants an integer%s, got '%s'", p->name,
                 (p->flags & PF_ALL) ? " or all" : "", text);
        return false;
    }
    v->f = (double)v->i;
    if (p->min < p->max && (v->f < p->min || v->f > p->max)) {
        snprintf(why, cap, "%s %s is out of range: valid values are %.0f-%.0f", p->name, text, p->min, p->max);
        return false;
    }
    return true;
}

/* ARG_FLOAT: a finite number within the bounds (the minimum itself out with PF_OPEN_MIN). */
static bool convert_float(const Param *p, const char *text, ArgVal *v, char *why, size_t cap) {
    char *end;
    errno = 0;
    v->f = strtod(text, &end);
    if (!*text || *end || errno || !isfinite(v->f)) {
        snprintf(why, cap, "%s wants a number, got '%s'", p->name, text);
        return false;
    }
    bool open = p->flags & PF_OPEN_MIN;
    if (p->min < p->max && (v->f < p->min || (open && v->f == p->min) || v->f > p->max)) {
        snprintf(why, cap, "%s %s is out of range: valid values are %s%g, %g]", p->name, text, open ? "(" : "[",
                 p->min, p->max);
        return false;
    }
    v->i = (long)v->f;
    return true;
}

/* ARG_ENUM: one of the choices (its index), else the choices with "did you mean". */
static bool convert_enum(const Param *p, const char *text, ArgVal *v, char *why, size_t cap) {
    OutSuggest sg = {0};
    char sb[96], mv[768];
    for (int i = 0; p->choices && p->choices[i]; i++) {
        if (!strcmp(p->choices[i], text)) { v->choice = i; return true; }
        out_suggest_try(&sg, text, p->choices[i]);
    }
    cmd_metavar(p, mv, sizeof mv);
    snprintf(why, cap, "%s must be one of %s, got '%s'%s", p->name, mv, text, out_suggest_text(&sg, sb, sizeof sb));
    return false;
}

/* ARG_RANGE: A-B (A <= B, both >= 0), one number, or `all` (i 0, hi -1). */
static bool convert_range(const Param *p, const char *text, ArgVal *v, char *why, size_t cap) {
    if (!strcmp(text, "all")) { v->all = true; v->i = 0; v->hi = -1; return true; }
    const char *dash = strchr(text + (text[0] == '-'), '-');
    char a[64];
    bool ok;
    if (dash) {
        size_t la = (size_t)(dash - text);
        if (la >= sizeof a) la = sizeof a - 1;
        memcpy(a, text, la);
        a[la] = 0;
        ok = parse_long(a, &v->i) && parse_long(dash + 1, &v->hi);
    } else {
        ok = parse_long(text, &v->i);
        v->hi = v->i;
    }
    if (!ok || v->i < 0 || v->hi < v->i) {
        snprintf(why, cap, "%s wants a range A-B (A <= B), a number, or all; got '%s'", p->name, text);
        return false;
    }
    v->f = (double)v->i;
    return true;
}

/* Converts text for parameter p into v; on failure writes the reason into why. */
static bool convert(const Param *p, const char *text, ArgVal *v, char *why, size_t cap) {
    v->all = false;
    switch (p->type) {
    case ARG_STRING: case ARG_PATH: case ARG_FLAG: return true;
    case ARG_INT: return convert_int(p, text, v, why, cap);
    case ARG_FLOAT: return convert_float(p, text, v, why, cap);
    case ARG_ENUM: return convert_enum(p, text, v, why, cap);
    case ARG_RANGE: return convert_range(p, text, v, why, cap);
    }
    return false;
}

/* Checks a layer / head number against the current model (if any). */
static bool check_bounds(Session *s, const Param *p, const ArgVal *v, char *why, size_t cap) {
    if (!s || !s->cur || v->all || (p->comp != COMP_LAYERS && p->comp != COMP_HEADS)) return true;
    long n = p->comp == COMP_LAYERS ? s->cur->cfg.n_layers : s->cur->cfg.n_heads;
    const char *what = p->comp == COMP_LAYERS ? "layers" : "heads";
    long hi = p->type == ARG_RANGE ? v->hi : v->i;
    if (v->i >= 0 && hi < n) return true;
    snprintf(why, cap, "%s %s is out of range: %s has %ld %s (0-%ld)", p->name, v->s, s->cur->name ? s->cur->name : "the model",
             n, what, n - 1);
    return false;
}

/* ================================================================ usage */

char *cmd_usage(const Command *c, const char *prefix) {
    char buf[4096], mv[1024];   /* mv: an enum of every synth family (~40 names) */
    size_t n = 0;
#define ADD(...) do { int k_ = snprintf(buf + n, n < sizeof buf ? sizeof buf - n : 0, __VA_ARGS__); \
                      if (k_ > 0) n += (size_t)k_; } while (0)
    if (prefix && *prefix) ADD("%s ", prefix);
    ADD("%s", c->name);
    if (c->sub) {
        ADD(" ");
        for (const Command *s = c->sub; s->name; s++) ADD("%s%s", s == c->sub ? "" : "|", s->name);
        ADD(" ...");
    }
    for (const Param *p = c->pos; p && p->name; p++) {
        cmd_metavar(p, mv, sizeof mv);
        bool opt = p->def != NULL;
        ADD(opt ? " [%s]" : " %s", (p->flags & PF_REST) ? (p->metavar ? p->metavar : "CODE...") : mv);
    }
    for (const Param *p = c->kw; p && p->name; p++) {
        cmd_metavar(p, mv, sizeof mv);
        if (p->type == ARG_FLAG) ADD(" [%s]", p->name);
        else ADD(" [%s %s]", p->name, mv);
    }
#undef ADD
    if (n >= sizeof buf) n = sizeof buf - 1;
    buf[n] = 0;
    return al_strdup(buf);
}

/* ================================================================ table checks */

/* Checks one parameter list of command `path`. */
static int validate_params(const char *path, const Param *ps, bool positional) {
    bool optional_seen = false;
    for (const Param *p = ps; p && p->name; p++) {
        if (!*p->name) return al_err("%s: a parameter has an empty name", path);
        if (!p->help || !*p->help) return al_err("%s: parameter '%s' has no help line", path, p->name);
        if (p->comp == COMP_UNSET) return al_err("%s: parameter '%s' has no completion hint (.comp; COMP_NONE for free text)", path, p->name);
        if ((p->comp == COMP_FILES) != (p->type == ARG_PATH))   /* file names only where a file goes */
            return al_err("%s: parameter '%s': file completion (COMP_FILES) goes with ARG_PATH and only there", path, p->name);
        if (p->type == ARG_ENUM && (!p->choices || !p->choices[0]))
            return al_err("%s: enum parameter '%s' has no choices", path, p->name);
        if (p->comp == COMP_CHOICES && p->type != ARG_ENUM)
            return al_err("%s: parameter '%s' completes from choices but is not an enum", path, p->name);
        if (positional && p->type == ARG_FLAG) return al_err("%s: positional '%s' cannot be a flag", path, p->name);
        if ((p->flags & (PF_LINE | PF_TEXT)) && !(p->flags & PF_REST))
            return al_err("%s: PF_LINE / PF_TEXT on '%s' needs PF_REST too", path, p->name);
        if (p->flags & PF_REST) {
            if (!positional || p->type != ARG_STRING || p[1].name)
                return al_err("%s: PF_REST on '%s' needs the last positional, of type string", path, p->name);
        }
        if (positional) {
            if (p->def) optional_seen = true;
            else if (optional_seen) return al_err("%s: required positional '%s' after an optional one", path, p->name);
        }
        for (const Param *q = ps; q < p; q++)
            if (!strcmp(q->name, p->name)) return al_err("%s: parameter '%s' declared twice", path, p->name);
        if (p->def && *p->def && p->type != ARG_FLAG) {
            ArgVal v = { .p = p };
            char why[1024];
            if (!convert(p, p->def, &v, why, sizeof why))
                return al_err("%s: default '%s' of '%s' does not parse: %s", path, p->def, p->name, why);
        }
    }
    return AL_OK;
}

int cmd_validate(const Command *c, const char *prefix) {
    char path[128];
    snprintf(path, sizeof path, "%s%s%s", prefix ? prefix : "", prefix ? " " : "", c->name ? c->name : "?");
    if (!c->name || !*c->name) return al_err("%s: a command has no name", path);
    if (!c->summary || !*c->summary) return al_err("%s: no summary (one line for help)", path);
    if (!c->help || !*c->help) return al_err("%s: no long help (.help)", path);
    if (!c->fn == !c->sub) return al_err("%s: needs exactly one of a handler (.fn) or sub-commands (.sub)", path);
    if (c->sub && (c->pos || c->kw)) return al_err("%s: a command with sub-commands takes its parameters in them", path);
    if (nparams(c->pos) > ARGS_MAX || nparams(c->kw) > ARGS_MAX) return al_err("%s: more than %d parameter%s", path, ARGS_MAX, al_s(ARGS_MAX));
    if (validate_params(path, c->pos, true) || validate_params(path, c->kw, false)) return AL_ERR;
    for (const Param *p = c->kw; p && p->name; p++)
        for (const Param *q = c->pos; q && q->name; q++)
            if (!strcmp(p->name, q->name)) return al_err("%s: '%s' is both a keyword and a positional", path, p->name);
    for (const Command *sc = c->sub; sc && sc->name; sc++) {
        for (const Command *o = c->sub; o < sc; o++)
            if (!strcmp(o->name, sc->name)) return al_err("%s: sub-command '%s' declared twice", path, sc->name);
        if (cmd_validate(sc, path)) return AL_ERR;
    }
    return AL_OK;
}

/* ================================================================ parser */

/* Fills v from text for parameter p, reporting errors at col. */
static int set_value(Session *s, Args *a, const Param *p, ArgVal *v, const char *text, size_t col,
                     bool given, ParseErr *e) {
    char why[1024];
    v->s = args_keep(a, text);
    if (!v->s) return perr(e, col, "out of memory");
    v->col = col;
    if (!convert(p, text, v, why, sizeof why)) return perr(e, col, "%s", why);
    if (given && !check_bounds(s, p, v, why, sizeof why)) return perr(e, col, "%s", why);
    v->given = given;
    v->present = true;
    return AL_OK;
}

/* The closest keyword of c to word (NULL if none is close). */
static const char *near_keyword(const Command *c, const char *word) {
    OutSuggest sg = {0};
    for (const Param *p = c->kw; p && p->name; p++) out_suggest_try(&sg, word, p->name);
    return sg.best;
}

/* "layer, tau, to" */
static void keyword_list(const Command *c, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (const Param *p = c->kw; p && p->name; p++)
        n += (size_t)snprintf(buf + n, n < cap ? cap - n : 0, "%s%s", p == c->kw ? "" : ", ", p->name);
}

/* The command that token 0 names into a->top (an unknown word: the error, with "did you mean"). */
static int parse_top(const Tokens *t, Args *a, ParseErr *e) {
    char sb[128];
    const Command *c = cmd_find(t->tok[0].text);
    if (!c || t->tok[0].quoted) {
        OutSuggest sg = {0};
        const Command *k;
        for (size_t i = 0; (k = cmd_at(i, NULL)); i++) out_suggest_try(&sg, t->tok[0].text, k->name);
        return perr(e, t->tok[0].col, "unknown command '%s'%s; type help for the list",
                    t->tok[0].text, out_suggest_text(&sg, sb, sizeof sb));
    }
    a->top = c;
    snprintf(a->path, sizeof a->path, "%s", c->name);
    return AL_OK;
}

/* From a->top, follows the sub-command words from token *ti on (advancing it) to the command
 * that runs, extending a->path; *cmd is it. */
static int parse_subs(const Tokens *t, size_t *ti, Args *a, const Command **cmd, ParseErr *e) {
    char sb[128];
    const Command *c = a->top;
    while (c->sub) {
        char subs[512];
        size_t n = 0;
        subs[0] = 0;
        for (const Command *k = c->sub; k->name; k++)
            n += (size_t)snprintf(subs + n, n < sizeof subs ? sizeof subs - n : 0, "%s%s", k == c->sub ? "" : "|", k->name);
        if (*ti >= t->n)
            return perr(e, t->end, "'%s' needs a sub-command: %s (help %s)", a->path, subs, a->path);
        const Command *sc = cmd_find_sub(c, t->tok[*ti].text);
        if (!sc) {
            OutSuggest sg = {0};
            for (const Command *k = c->sub; k->name; k++) out_suggest_try(&sg, t->tok[*ti].text, k->name);
            return perr(e, t->tok[*ti].col, "unknown sub-command '%s' of %s%s; choose %s",
                        t->tok[*ti].text, a->path, out_suggest_text(&sg, sb, sizeof sb), subs);
        }
        size_t pl = strlen(a->path);
        snprintf(a->path + pl, sizeof a->path - pl, " %s", sc->name);
        c = sc;
        (*ti)++;
    }
    *cmd = c;
    return AL_OK;
}

/* Sets a->cmd to c and binds each of a's slots to its parameter of c. */
static int bind_params(const Tokens *t, const Command *c, Args *a, ParseErr *e) {
    a->cmd = c;
    a->npos = nparams(c->pos);
    a->nkw = nparams(c->kw);
    if (a->npos > ARGS_MAX || a->nkw > ARGS_MAX)
        return perr(e, t->tok[0].col, "command '%s' declares too many parameters (at most %d)", a->path, ARGS_MAX);
    for (size_t i = 0; i < a->npos; i++) a->pos[i].p = &c->pos[i];
    for (size_t i = 0; i < a->nkw; i++) a->kw[i].p = &c->kw[i];
    return AL_OK;
}

/* Keyword kp at token *ti: a flag set, or its value from the next token (advancing *ti). */
static int parse_keyword(Session *s, const Tokens *t, size_t *ti, const Param *kp, Args *a, ParseErr *e) {
    const Token *tk = &t->tok[*ti];
    ArgVal *v = &a->kw[kp - a->cmd->kw];
    if (v->given) return perr(e, tk->col, "keyword '%s' given twice", kp->name);
    if (kp->type == ARG_FLAG) {
        v->given = v->present = true;
        v->col = tk->col;
        v->s = kp->name;
        return AL_OK;
    }
    if (*ti + 1 >= t->n) {
        char tmp[512];
        cmd_metavar(kp, tmp, sizeof tmp);
        return perr(e, t->end, "keyword '%s' needs a value: %s %s", kp->name, kp->name, tmp);
    }
    (*ti)++;
    return set_value(s, a, kp, v, t->tok[*ti].text, t->tok[*ti].col, true, e);
}

/* Token tk as positional number i (a word that does not convert but is near a keyword: that
 * keyword suggested). */
static int parse_positional(Session *s, const Token *tk, size_t i, Args *a, ParseErr *e) {
    const Param *pp = &a->cmd->pos[i];
    ArgVal *v = &a->pos[i];
    char why[1024];
    v->s = args_keep(a, tk->text);
    if (!v->s) return perr(e, tk->col, "out of memory");
    if (!convert(pp, tk->text, v, why, sizeof why)) {
        const char *near = tk->quoted ? NULL : near_keyword(a->cmd, tk->text);
        if (near) return perr(e, tk->col, "unknown keyword '%s' (did you mean '%s'?)", tk->text, near);
        return perr(e, tk->col, "%s", why);
    }
    v->col = tk->col;
    if (!check_bounds(s, pp, v, why, sizeof why)) return perr(e, tk->col, "%s", why);
    v->given = v->present = true;
    return AL_OK;
}

/* The error for token tk, which is neither a keyword nor a positional left: a near keyword, or
 * the keywords and the usage. Always AL_ERR. */
static int unexpected_arg(const Token *tk, Args *a, ParseErr *e) {
    const Command *c = a->cmd;
    const char *near = tk->quoted ? NULL : near_keyword(c, tk->text);
    if (near) return perr(e, tk->col, "unknown keyword '%s' (did you mean '%s'?)", tk->text, near);
    char *u = cmd_usage(c, c == a->top ? NULL : a->top->name), tmp[512];
    if (a->nkw) {
        keyword_list(c, tmp, sizeof tmp);
        perr(e, tk->col, "unexpected argument '%s' (keywords of %s: %s); usage: %s", tk->text, a->path, tmp, u ? u : "");
    } else
        perr(e, tk->col, "unexpected argument '%s'; usage: %s", tk->text, u ? u : "");
    free(u);
    return AL_ERR;
}

/* The argument tokens from ti on: each a keyword (with its value), else the next positional. */
static int parse_args(Session *s, const Tokens *t, size_t ti, Args *a, ParseErr *e) {
    size_t npos_given = 0;
    for (; ti < t->n; ti++) {
        const Token *tk = &t->tok[ti];
        const Param *kp = tk->quoted ? NULL : find_keyword(a->cmd, tk->text);
        int rc = kp ? parse_keyword(s, t, &ti, kp, a, e)
               : npos_given < a->npos ? parse_positional(s, tk, npos_given++, a, e)
               : unexpected_arg(tk, a, e);
        if (rc) return rc;
    }
    return AL_OK;
}

/* Positionals not given: a required one is an error (with the usage), an optional one takes its
 * default; then every keyword not given that has a default takes it. */
static int parse_defaults(Session *s, const Tokens *t, Args *a, ParseErr *e) {
    const Command *c = a->cmd;
    for (size_t i = 0; i < a->npos; i++) {
        ArgVal *v = &a->pos[i];
        if (v->present) continue;
        const Param *p = v->p;
        if (!p->def) {
            char *u = cmd_usage(c, c == a->top ? NULL : a->top->name), tmp[512];
            cmd_metavar(p, tmp, sizeof tmp);
            perr(e, t->end, "missing %s (%s); usage: %s", p->name, tmp, u ? u : "");
            free(u);
            return AL_ERR;
        }
        if (set_value(s, a, p, v, p->def, t->end, false, e))
            return perr(e, t->end, "bad default '%s' for %s in the command table", p->def, p->name);
    }
    for (size_t i = 0; i < a->nkw; i++) {
        ArgVal *v = &a->kw[i];
        if (v->present || !v->p->def || v->p->type == ARG_FLAG) continue;
        if (set_value(s, a, v->p, v, v->p->def, t->end, false, e))
            return perr(e, t->end, "bad default '%s' for %s in the command table", v->p->def, v->p->name);
    }
    return AL_OK;
}

int cmd_parse_tokens(Session *s, const Tokens *t, const char *line, Args *a, ParseErr *e) {
    (void)line;
    memset(a, 0, sizeof *a);
    e->col = 0; e->msg[0] = 0;
    if (t->n == 0) return perr(e, t->end, "empty command");
    size_t ti = 1;
    const Command *c;
    if (parse_top(t, a, e) || parse_subs(t, &ti, a, &c, e) || bind_params(t, c, a, e)) return AL_ERR;
    if (parse_args(s, t, ti, a, e)) return AL_ERR;
    return parse_defaults(s, t, a, e);
}

int cmd_parse(Session *s, const char *line, Args *a, ParseErr *e) {
    Tokens t = {0};
    size_t next;
    memset(a, 0, sizeof *a);
    if (cmd_tokenize(line, 0, &next, &t, e)) return AL_ERR;
    if (next < strlen(line)) {
        size_t col = next - 1;
        tokens_free(&t);
        return perr(e, col, "one command expected here; ';' separates commands at the prompt");
    }
    int rc = cmd_parse_tokens(s, &t, line, a, e);
    tokens_free(&t);
    if (rc) args_free(a);
    return rc;
}

/* ================================================================ a command as a line */

/* Appends word to the growing line *buf (quoted when it holds a blank, ';', a quote or is empty; in
 * the quotes the escapes cmd_tokenize reads: \" \\ \n \t). */
static int line_add(char **buf, size_t *n, size_t *cap, const char *word) {
    bool q = !*word || strpbrk(word, " \t\n;\"'#=") != NULL;
    size_t need = *n + 2 * strlen(word) + 4;
    if (al_reserve(buf, cap, need, 1, "a command line")) return AL_ERR;
    char *p = *buf + *n;
    if (*n) *p++ = ' ';
    if (q) *p++ = '"';
    for (const char *w = word; *w; w++) {
        if (q && (*w == '"' || *w == '\\' || *w == '\n' || *w == '\t')) *p++ = '\\';
        *p++ = q && *w == '\n' ? 'n' : q && *w == '\t' ? 't' : *w;
    }
    if (q) *p++ = '"';
    *p = 0;
    *n = (size_t)(p - *buf);
    return AL_OK;
}

char *args_line(const Args *a) {
    char *buf = NULL;
    size_t n = 0, cap = 0;
    int rc = line_add(&buf, &n, &cap, a->top->name);
    if (!rc && a->cmd != a->top) rc = line_add(&buf, &n, &cap, a->cmd->name);
    for (size_t i = 0; !rc && i < a->npos; i++)
        if (a->pos[i].given && a->pos[i].s) rc = line_add(&buf, &n, &cap, a->pos[i].s);
    for (size_t i = 0; !rc && i < a->nkw; i++) {
        if (!a->kw[i].given) continue;
        rc = line_add(&buf, &n, &cap, a->kw[i].p->name);
        if (!rc && a->kw[i].p->type != ARG_FLAG && a->kw[i].s) rc = line_add(&buf, &n, &cap, a->kw[i].s);
    }
    if (rc) { free(buf); return NULL; }
    return buf;
}

/* ================================================================ dispatch */

static const Args *running;
static cmd_observer_fn observer;

const Args *cmd_running(void) { return running; }
void cmd_set_observer(cmd_observer_fn fn) { observer = fn; }

/* With `set csv.params on`, the command's settings and parameters as CSV context columns (out.h):
 * the model; every number or word choice in force (typed or defaulted) except the layer and head
 * selections, which are the rows, and PF_VIEW ones (`order`), which only arrange them; a keyword
 * left out that names a setting (tau) with the setting's value. */
static void dispatch_context(Session *s, const Args *a, Out *out) {
    out->nctx = 0;
    if (!s->csv_params || strcmp(s->csv_params, "on")) return;
    if (((a->cmd->flags | a->top->flags) & CMD_MODEL) && s->cur) out_context(out, "model", s->cur->name);
    for (int pass = 0; pass < 2; pass++)
        for (size_t i = 0; i < (pass ? a->nkw : a->npos); i++) {
            const ArgVal *v = pass ? &a->kw[i] : &a->pos[i];
            const Param *p = v->p;
            if (!p || !(p->type == ARG_INT || p->type == ARG_FLOAT || p->type == ARG_ENUM)) continue;
            if (p->comp == COMP_LAYERS || p->comp == COMP_HEADS) continue;
            if (p->flags & PF_VIEW) continue;
            if (v->present && v->s) { out_context(out, p->name, v->s); continue; }
            const Setting *st;
            for (size_t k = 0; (st = session_setting_at(k)); k++) {
                if (strcmp(st->name, p->name)) continue;
                char *val = session_get(s, st->name);
                if (val) out_context(out, p->name, val);
                free(val);
            }
        }
}

int cmd_dispatch(Session *s, const Args *a, Out *out) {
    if (!a->cmd || !a->cmd->fn) return al_err("'%s' has no handler", a->path);
    if (((a->cmd->flags | a->top->flags) & CMD_MODEL) && !s->cur)
        return al_err("%s needs a model: load one first (load demo-r1, load PATH, or load org/name)", a->path);
    out->fmt = s->fmt;
    out->prec = s->prec;
    out->may_write = write_guard_check;      /* never into a loaded model's folder */
    out->may_write_ud = s;
    dispatch_context(s, a, out);
    for (size_t i = 0; i < a->nkw; i++)        /* a table's `to FILE`: refused before the work, not after */
        if (a->kw[i].given && a->kw[i].p && (a->kw[i].p->flags & PF_TABLE_TO) && table_path_check(out, a->kw[i].s))
            return AL_ERR;
    if (al_interrupted()) return al_err("interrupted");
    al_err_clear();
    const Args *outer = running;
    running = a;
    int rc = a->cmd->fn(s, a, out);
    running = outer;
    if (rc == AL_OK && observer) observer(s, a);
    if (rc == AL_INTERRUPTED) {
        if (!strstr(al_errmsg(), "interrupt")) al_err("%s: interrupted", a->path);
    } else if (rc == AL_ERR && !strcmp(al_errmsg(), "unknown error"))
        al_err("%s failed", a->path);
    return rc;
}
