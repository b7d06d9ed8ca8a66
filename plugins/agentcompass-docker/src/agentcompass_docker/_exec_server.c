/* The exec server in C: the same program as _exec_server.py (read its docstring for the protocol), built on
 * the host as a static binary (native.py) and started in each container instead of `python3 -I -S -c`, which
 * costs every container tens of milliseconds of CPU where this costs well under one. Same frames, same
 * requests (the header is marshal data, version 4), same JSON replies, same timeouts, process-tree kill,
 * child subreaping, output caps, shutdown rule and gateway forwarder. Linux only; libc and pthreads only.
 *
 * Usage: ac-exec-server SOCKET [GATEWAY_SOCKET PORT]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_FRAME (1u << 20)
#define OUTPUT_LIMIT (8u * 1024 * 1024)
#define EXEC_ID_VARIABLE "AGENTCOMPASS_EXEC_ID"
#define KILL_GRACE 3.0
#define SHUTDOWN_STATUS 86

extern char **environ;

/* -- memory: one arena per request, freed at its end ------------------------------------------------------- */

typedef struct Block { struct Block *next; size_t used, size; char data[]; } Block;
typedef struct { Block *head; } Arena;

static void *arena_alloc(Arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (!a->head || a->head->size - a->head->used < n) {
        size_t size = n > 65536 ? n : 65536;
        Block *b = malloc(sizeof(Block) + size);
        if (!b) abort();
        b->next = a->head; b->used = 0; b->size = size; a->head = b;
    }
    void *p = a->head->data + a->head->used;
    a->head->used += n;
    return p;
}

static void arena_free(Arena *a) {
    while (a->head) { Block *next = a->head->next; free(a->head); a->head = next; }
}

/* A growable byte buffer (replies, paths). */
typedef struct { char *p; size_t n, cap; } Buf;

static void buf_add(Buf *b, const void *data, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) abort();
        b->p = p; b->cap = cap;
    }
    memcpy(b->p + b->n, data, n);
    b->n += n;
    b->p[b->n] = 0;
}
static void buf_str(Buf *b, const char *s) { buf_add(b, s, strlen(s)); }
static void buf_fmt(Buf *b, const char *fmt, ...) {
    char tmp[256];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    buf_add(b, tmp, n < (int)sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

/* -- the request: marshal data (dicts, lists, str, int, float, None, bool) -------------------------------- */

enum { V_NONE, V_BOOL, V_INT, V_FLOAT, V_STR, V_LIST, V_DICT };
typedef struct Val {
    int type;
    long long i;
    double f;
    char *s;          /* V_STR: NUL-terminated copy, length n */
    size_t n;         /* V_STR: bytes; V_LIST: items; V_DICT: pairs */
    struct Val **items; /* V_LIST: n items; V_DICT: 2n (key, value) */
} Val;

typedef struct {
    const unsigned char *p, *end;
    Arena *arena;
    Val **refs;
    size_t nrefs, caprefs;
    int depth;
} Reader;

static int rd_bytes(Reader *r, size_t n, const unsigned char **out) {
    if ((size_t)(r->end - r->p) < n) return -1;
    *out = r->p;
    r->p += n;
    return 0;
}
static int rd_i32(Reader *r, int32_t *out) {
    const unsigned char *b;
    if (rd_bytes(r, 4, &b)) return -1;
    *out = (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
    return 0;
}
static size_t add_ref(Reader *r, Val *v) {
    if (r->nrefs == r->caprefs) {
        r->caprefs = r->caprefs ? r->caprefs * 2 : 32;
        r->refs = realloc(r->refs, r->caprefs * sizeof(Val *));
        if (!r->refs) abort();
    }
    r->refs[r->nrefs] = v;
    return r->nrefs++;
}

static Val *rd_value(Reader *r);

static Val *rd_string(Reader *r, Val *v, size_t n) {
    const unsigned char *b;
    if (rd_bytes(r, n, &b)) return NULL;
    v->type = V_STR;
    v->s = arena_alloc(r->arena, n + 1);
    memcpy(v->s, b, n);
    v->s[n] = 0;
    v->n = n;
    return v;
}

static Val *rd_value(Reader *r) {
    const unsigned char *b;
    if (++r->depth > 64 || rd_bytes(r, 1, &b)) return NULL;
    int code = b[0] & 0x7f, flag = b[0] & 0x80;
    Val *v = arena_alloc(r->arena, sizeof(Val));
    memset(v, 0, sizeof *v);
    size_t ref = flag ? add_ref(r, v) : 0;
    (void)ref;
    int32_t n;
    Val *out = v;
    switch (code) {
    case 'N': v->type = V_NONE; break;
    case 'T': v->type = V_BOOL; v->i = 1; break;
    case 'F': v->type = V_BOOL; v->i = 0; break;
    case 'i':
        if (rd_i32(r, &n)) return NULL;
        v->type = V_INT; v->i = n;
        break;
    case 'l': { /* digits of 15 bits, least significant first; the count's sign is the number's */
        if (rd_i32(r, &n)) return NULL;
        int count = n < 0 ? -n : n;
        if (count > 4) return NULL;
        long long value = 0;
        for (int k = 0; k < count; k++) {
            if (rd_bytes(r, 2, &b)) return NULL;
            value |= (long long)(b[0] | b[1] << 8) << (15 * k);
        }
        v->type = V_INT; v->i = n < 0 ? -value : value;
        break;
    }
    case 'g':
        if (rd_bytes(r, 8, &b)) return NULL;
        v->type = V_FLOAT;
        memcpy(&v->f, b, 8); /* little-endian IEEE 754, as on every host this runs on */
        break;
    case 'u': case 't': case 'a': case 'A': case 's':
        if (rd_i32(r, &n) || n < 0) return NULL;
        out = rd_string(r, v, (size_t)n);
        break;
    case 'z': case 'Z':
        if (rd_bytes(r, 1, &b)) return NULL;
        out = rd_string(r, v, b[0]);
        break;
    case '[': case '(': case ')': case '<': case '>': {
        size_t count;
        if (code == ')') {
            if (rd_bytes(r, 1, &b)) return NULL;
            count = b[0];
        } else {
            if (rd_i32(r, &n) || n < 0) return NULL;
            count = (size_t)n;
        }
        if (count > (size_t)(r->end - r->p)) return NULL;
        v->type = V_LIST;
        v->n = count;
        v->items = arena_alloc(r->arena, (count + 1) * sizeof(Val *));
        for (size_t k = 0; k < count; k++)
            if (!(v->items[k] = rd_value(r))) return NULL;
        break;
    }
    case '{': {
        size_t cap = 8;
        v->type = V_DICT;
        v->items = arena_alloc(r->arena, 2 * cap * sizeof(Val *));
        for (;;) {
            if (r->p < r->end && *r->p == '0') { r->p++; break; }
            Val *key = rd_value(r);
            if (!key) return NULL;
            Val *value = rd_value(r);
            if (!value) return NULL;
            if (v->n == cap) {
                Val **items = arena_alloc(r->arena, 4 * cap * sizeof(Val *));
                memcpy(items, v->items, 2 * cap * sizeof(Val *));
                v->items = items;
                cap *= 2;
            }
            v->items[2 * v->n] = key;
            v->items[2 * v->n + 1] = value;
            v->n++;
        }
        break;
    }
    case 'r':
        if (rd_i32(r, &n) || n < 0 || (size_t)n >= r->nrefs || flag) return NULL;
        out = r->refs[n];
        break;
    default:
        return NULL;
    }
    r->depth--;
    return out;
}

static Val *get(Val *dict, const char *key) {
    if (!dict || dict->type != V_DICT) return NULL;
    for (size_t k = 0; k < dict->n; k++) {
        Val *name = dict->items[2 * k];
        if (name->type == V_STR && strcmp(name->s, key) == 0) return dict->items[2 * k + 1];
    }
    return NULL;
}
static const char *get_str(Val *dict, const char *key) {
    Val *v = get(dict, key);
    return v && v->type == V_STR ? v->s : NULL;
}

/* -- JSON replies ----------------------------------------------------------------------------------------- */

/* A JSON string of bytes taken as UTF-8 (what is not valid UTF-8 becomes U+FFFD, as Python's "replace"). */
static void json_str(Buf *b, const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    buf_add(b, "\"", 1);
    while (p < end) {
        unsigned c = *p;
        if (c == '"' || c == '\\') { buf_add(b, "\\", 1); buf_add(b, p, 1); p++; continue; }
        if (c < 0x20) { buf_fmt(b, "\\u%04x", c); p++; continue; }
        if (c < 0x80) { buf_add(b, p, 1); p++; continue; }
        size_t len = c >= 0xf0 && c < 0xf5 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
        int ok = len && (size_t)(end - p) >= len;
        for (size_t k = 1; ok && k < len; k++) ok = (p[k] & 0xc0) == 0x80;
        if (ok && len == 3) ok = !(c == 0xe0 && p[1] < 0xa0) && !(c == 0xed && p[1] >= 0xa0);
        if (ok && len == 4) ok = !(c == 0xf0 && p[1] < 0x90) && !(c == 0xf4 && p[1] >= 0x90);
        if (ok) { buf_add(b, p, len); p += len; }
        else { buf_str(b, "\xef\xbf\xbd"); p++; }
    }
    buf_add(b, "\"", 1);
}
static void json_cstr(Buf *b, const char *s) { json_str(b, s, strlen(s)); }

/* -- frames ----------------------------------------------------------------------------------------------- */

static int send_all(int fd, const void *data, size_t n) {
    const char *p = data;
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k; n -= (size_t)k;
    }
    return 0;
}

static int send_frame(int fd, char kind, const void *payload, size_t n) {
    size_t at = 0;
    do {
        size_t piece = n - at < MAX_FRAME ? n - at : MAX_FRAME;
        unsigned char head[5] = {(unsigned char)kind, piece >> 24, piece >> 16 & 255, piece >> 8 & 255, piece & 255};
        if (send_all(fd, head, 5) || send_all(fd, (const char *)payload + at, piece)) return -1;
        at += piece;
    } while (at < n);
    return 0;
}

static int send_reply(int fd, Buf *json) {
    int rc = send_frame(fd, 'X', json->p, json->n);
    free(json->p);
    json->p = NULL; json->n = json->cap = 0;
    return rc;
}

static int recv_exact(int fd, void *out, size_t n) {
    char *p = out;
    while (n) {
        ssize_t k = recv(fd, p, n, 0);
        if (k == 0) return -1;
        if (k < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += k; n -= (size_t)k;
    }
    return 0;
}

/* The next frame: its kind, its payload (malloc'd, *n bytes). -1 on EOF, error or a frame too large. */
static int recv_frame(int fd, char *kind, char **payload, size_t *n) {
    unsigned char head[5];
    if (recv_exact(fd, head, 5)) return -1;
    size_t size = (size_t)head[1] << 24 | head[2] << 16 | head[3] << 8 | head[4];
    if (size > MAX_FRAME) return -1;
    *kind = (char)head[0];
    *payload = malloc(size + 1);
    if (!*payload) abort();
    if (size && recv_exact(fd, *payload, size)) { free(*payload); return -1; }
    *n = size;
    return 0;
}

typedef int (*Sink)(void *context, const char *data, size_t n);

/* Pass `D` frames to sink until `E`. -1 when the conversation broke. */
static int receive_data(int fd, Sink sink, void *context) {
    for (;;) {
        char kind, *payload;
        size_t n;
        if (recv_frame(fd, &kind, &payload, &n)) return -1;
        if (kind == 'E') { free(payload); return 0; }
        if (kind != 'D') { free(payload); return -1; }
        if (sink) sink(context, payload, n);
        free(payload);
    }
}

static void error_reply(Buf *b, int number, const char *path, const char *reason) {
    Buf message = {0};
    buf_str(&message, path);
    buf_str(&message, ": ");
    buf_str(&message, reason);
    buf_fmt(b, "{\"error\":{\"errno\":%d,\"message\":", number ? number : EIO);
    json_str(b, message.p, message.n);
    buf_str(b, ",\"path\":");
    json_cstr(b, path);
    buf_str(b, "}}");
    free(message.p);
}

/* -- processes -------------------------------------------------------------------------------------------- */

typedef struct Waiter {
    pid_t pid;
    int status;      /* shell-style, once done */
    int done;
    int fd[2];       /* written to when done (so an exec can poll for it) */
    struct Waiter *next;
} Waiter;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t changed = PTHREAD_COND_INITIALIZER; /* a child spawned, or a waiter done */
static Waiter *waiters;

static void *reaper(void *unused) {
    (void)unused;
    for (;;) {
        int status;
        pid_t pid = waitpid(-1, &status, 0);
        if (pid < 0) {
            if (errno == ECHILD) {
                pthread_mutex_lock(&lock);
                if (!waiters) {
                    struct timespec until;
                    clock_gettime(CLOCK_REALTIME, &until);
                    until.tv_sec += 1;
                    pthread_cond_timedwait(&changed, &lock, &until);
                }
                pthread_mutex_unlock(&lock);
            }
            continue;
        }
        int code;
        if (WIFSIGNALED(status)) code = 128 + WTERMSIG(status);
        else if (WIFEXITED(status)) code = WEXITSTATUS(status);
        else continue;
        pthread_mutex_lock(&lock);
        for (Waiter **at = &waiters; *at; at = &(*at)->next) {
            if ((*at)->pid == pid) {
                Waiter *w = *at;
                *at = w->next;
                w->status = code;
                w->done = 1;
                if (write(w->fd[1], "x", 1) < 0) { /* the pipe has room: nothing to do */ }
                break;
            }
        }
        pthread_cond_broadcast(&changed);
        pthread_mutex_unlock(&lock);
    }
    return NULL;
}

static int waiter_done(Waiter *w) {
    pthread_mutex_lock(&lock);
    int done = w->done;
    pthread_mutex_unlock(&lock);
    return done;
}

/* Wait (at most `seconds`, forever when negative) until w's child has ended; whether it has. */
static int waiter_wait(Waiter *w, double seconds) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    if (seconds >= 0) {
        until.tv_sec += (time_t)seconds;
        until.tv_nsec += (long)((seconds - (double)(time_t)seconds) * 1e9);
        if (until.tv_nsec >= 1000000000L) { until.tv_sec++; until.tv_nsec -= 1000000000L; }
    }
    pthread_mutex_lock(&lock);
    while (!w->done) {
        if (seconds < 0) pthread_cond_wait(&changed, &lock);
        else if (pthread_cond_timedwait(&changed, &lock, &until) == ETIMEDOUT) break;
    }
    int done = w->done;
    pthread_mutex_unlock(&lock);
    return done;
}

static void waiter_close(Waiter *w) {
    close(w->fd[0]);
    close(w->fd[1]);
    free(w);
}

typedef struct {
    char **argv;
    char **envp;          /* NULL: this process's */
    const char *cwd;      /* NULL: stay */
    int fds[3];           /* what becomes 0, 1, 2 */
    int new_session;
} SpawnPlan;

/* Start a child (its status goes to the returned waiter), or NULL with errno set: why it could not start
 * (the child reports a failed chdir or exec through a close-on-exec pipe). */
static Waiter *spawn(SpawnPlan *plan) {
    Waiter *w = calloc(1, sizeof *w);
    if (!w) abort();
    int report[2];
    if (pipe2(w->fd, O_CLOEXEC | O_NONBLOCK) || pipe2(report, O_CLOEXEC)) abort();
    pthread_mutex_lock(&lock);
    pid_t pid = fork();
    if (pid == 0) {
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        signal(SIGPIPE, SIG_DFL);
        if (plan->new_session) setsid();
        int error = 0;
        for (int k = 0; k < 3 && !error; k++) {
            int fd = plan->fds[k];
            if (fd == k) { int flags = fcntl(fd, F_GETFD); fcntl(fd, F_SETFD, flags & ~FD_CLOEXEC); }
            else if (dup2(fd, k) < 0) error = errno;
        }
        if (!error && plan->cwd && chdir(plan->cwd)) error = errno;
        if (!error) {
            /* everything else goes (it is close-on-exec anyway), but the pipe that reports a failed exec */
            if (report[1] > 3) syscall(SYS_close_range, 3U, (unsigned)report[1] - 1, 0U);
            syscall(SYS_close_range, (unsigned)report[1] + 1, ~0U, 0U);
            if (plan->envp) environ = plan->envp; /* execvp looks PATH up in the new environment */
            execvp(plan->argv[0], plan->argv);
            error = errno;
        }
        if (write(report[1], &error, sizeof error) < 0) { /* nothing to add */ }
        _exit(127);
    }
    int saved = errno;
    if (pid > 0) {
        w->pid = pid;
        w->next = waiters;
        waiters = w;
        pthread_cond_broadcast(&changed);
    }
    pthread_mutex_unlock(&lock);
    close(report[1]);
    if (pid < 0) {
        close(report[0]);
        waiter_close(w);
        errno = saved;
        return NULL;
    }
    int error = 0;
    ssize_t got;
    do got = read(report[0], &error, sizeof error); while (got < 0 && errno == EINTR);
    close(report[0]);
    if (got == (ssize_t)sizeof error) {
        waiter_wait(w, -1); /* the child _exits at once */
        waiter_close(w);
        errno = error;
        return NULL;
    }
    return w;
}

typedef struct { char state; int ppid, pgrp, session; } Stat;

static int stat_of(int pid, Stat *out) {
    char path[64], data[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, data, sizeof data - 1);
    close(fd);
    if (n <= 0) return -1;
    data[n] = 0;
    char *close_paren = strrchr(data, ')');
    if (!close_paren || sscanf(close_paren + 1, " %c %d %d %d", &out->state, &out->ppid, &out->pgrp, &out->session) != 4)
        return -1;
    return 0;
}

static int has_marker(int pid, const char *marker) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/environ", pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    Buf data = {0};
    char chunk[65536];
    ssize_t n;
    while ((n = read(fd, chunk, sizeof chunk)) > 0) buf_add(&data, chunk, (size_t)n);
    close(fd);
    size_t len = strlen(marker);
    int found = 0;
    for (size_t at = 0; data.p && at < data.n && !found;) {
        size_t end = at;
        while (end < data.n && data.p[end]) end++;
        found = end - at == len && memcmp(data.p + at, marker, len) == 0;
        at = end + 1;
    }
    free(data.p);
    return found;
}

typedef struct { char name[2][64]; int count; } Pipes;

static int holds(int pid, const Pipes *pipes) {
    if (!pipes || !pipes->count) return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", pid);
    DIR *dir = opendir(path);
    if (!dir) return 0;
    int found = 0;
    struct dirent *entry;
    while (!found && (entry = readdir(dir))) {
        if (entry->d_name[0] == '.') continue;
        char link[300], target[128];
        snprintf(link, sizeof link, "/proc/%d/fd/%s", pid, entry->d_name);
        ssize_t n = readlink(link, target, sizeof target - 1);
        if (n <= 0) continue;
        target[n] = 0;
        for (int k = 0; k < pipes->count; k++) found |= strcmp(target, pipes->name[k]) == 0;
    }
    closedir(dir);
    return found;
}

typedef struct { int *pids; size_t n, cap; } PidSet;

static int pidset_has(const PidSet *s, int pid) {
    for (size_t k = 0; k < s->n; k++)
        if (s->pids[k] == pid) return 1;
    return 0;
}
static void pidset_add(PidSet *s, int pid) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 64;
        s->pids = realloc(s->pids, s->cap * sizeof(int));
        if (!s->pids) abort();
    }
    s->pids[s->n++] = pid;
}

/* What belongs to one exec (root 0: everything; see kill_matching). */
typedef struct { int root; const char *marker; const Pipes *pipes; } Belongs;

static int belongs(const Belongs *b, int pid, const Stat *st, const PidSet *members) {
    if (!b->root) return 1;
    return pid == b->root || st->session == b->root || pidset_has(members, st->ppid) || has_marker(pid, b->marker)
           || holds(pid, b->pipes);
}

/* SIGKILL every live process but `spare` that belongs, each SIGSTOPped as it is found (so none forks
 * meanwhile); passes repeat until one finds nothing. */
static void kill_matching(const Belongs *b, const int *spare, int nspare) {
    for (int pass = 0; pass < 20; pass++) {
        PidSet members = {0};
        int fresh = 1;
        while (fresh) {
            fresh = 0;
            DIR *dir = opendir("/proc");
            if (!dir) break;
            struct dirent *entry;
            while ((entry = readdir(dir))) {
                char *end;
                long value = strtol(entry->d_name, &end, 10);
                if (*end || end == entry->d_name) continue;
                int pid = (int)value, spared = 0;
                for (int k = 0; k < nspare; k++) spared |= spare[k] == pid;
                if (spared || pidset_has(&members, pid)) continue;
                Stat st;
                if (stat_of(pid, &st) || st.state == 'Z' || st.state == 'X' || st.state == 'x') continue;
                if (!belongs(b, pid, &st, &members)) continue;
                if (kill(pid, SIGSTOP)) continue;
                pidset_add(&members, pid);
                fresh = 1;
            }
            closedir(dir);
        }
        if (!members.n) { free(members.pids); return; }
        for (size_t k = 0; k < members.n; k++) kill(members.pids[k], SIGKILL);
        free(members.pids);
    }
}

static void kill_tree(int root, const char *marker, const Pipes *pipes) {
    Belongs b = {root, marker, pipes};
    int spare[] = {1, getpid()};
    kill_matching(&b, spare, 2);
}

/* Whether this server runs as the container keeper's child, the keeper being PID 1 or PID 1's child. */
static int under_keeper(void) {
    int parent = getppid();
    char path[64], data[4096];
    snprintf(path, sizeof path, "/proc/%d/cmdline", parent);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, data, sizeof data - 1);
    close(fd);
    if (n <= 0) return 0;
    data[n] = 0;
    int found = 0;
    size_t at = 0;
    for (int k = 0; k < 4 && at < (size_t)n; k++) {
        found |= strcmp(data + at, "ac-server") == 0;
        at += strlen(data + at) + 1;
    }
    Stat st;
    return found && stat_of(parent, &st) == 0 && (parent == 1 || st.ppid == 1);
}

static void oom_kills(char *out, size_t size) {
    static const char *paths[] = {"/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"};
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(paths[k], "re");
        if (!f) continue;
        char line[256];
        while (fgets(line, sizeof line, f)) {
            if (strncmp(line, "oom_kill ", 9) == 0) {
                char *value = line + 9;
                value[strcspn(value, " \t\r\n")] = 0;
                snprintf(out, size, "%.60s", value);
                fclose(f);
                return;
            }
        }
        fclose(f);
    }
    snprintf(out, size, "-");
}

/* -- files ------------------------------------------------------------------------------------------------ */

/* os.makedirs(path, exist_ok=True). */
static int make_dirs(const char *path) {
    struct stat st;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        errno = EEXIST;
        return -1;
    }
    char *copy = strdup(path);
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/') copy[--n] = 0;
    char *slash = strrchr(copy, '/');
    if (slash && slash != copy) {
        *slash = 0;
        if (make_dirs(copy)) { free(copy); return -1; }
        *slash = '/';
    }
    int rc = mkdir(copy, 0777);
    if (rc && errno == EEXIST && stat(copy, &st) == 0 && S_ISDIR(st.st_mode)) rc = 0;
    free(copy);
    return rc;
}

static int make_parent(const char *path) {
    char *copy = strdup(path);
    char *slash = strrchr(copy, '/');
    int rc = 0;
    if (slash && slash != copy) {
        *slash = 0;
        struct stat st;
        if (stat(copy, &st) || !S_ISDIR(st.st_mode)) rc = make_dirs(copy);
    }
    free(copy);
    return rc;
}

static int put(const char *path, const char *data, size_t n) {
    if (make_parent(path)) return -1;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0) return -1;
    while (n) {
        ssize_t k = write(fd, data, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            int saved = errno;
            close(fd);
            errno = saved;
            return -1;
        }
        data += k; n -= (size_t)k;
    }
    return close(fd);
}

static int b64_value(int c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* binascii.a2b_base64 (non-alphabet characters skipped, padding ends it); -1 on a bad length. */
static long b64_decode(const char *s, size_t n, char *out) {
    unsigned acc = 0;
    int bits = 0, count = 0;
    long len = 0;
    for (size_t k = 0; k < n; k++) {
        if (s[k] == '=') break;
        int v = b64_value((unsigned char)s[k]);
        if (v < 0) continue;
        acc = acc << 6 | (unsigned)v;
        bits += 6;
        count++;
        if (bits >= 8) { bits -= 8; out[len++] = (char)(acc >> bits & 255); }
    }
    return count % 4 == 1 ? -1 : len;
}

/* Apply batched writes; 0 (after the error reply) when one failed. */
static int apply_writes(int fd, Val *writes) {
    if (!writes || writes->type != V_LIST) return 1;
    for (size_t k = 0; k + 1 < writes->n; k += 2) {
        Val *path = writes->items[k], *data = writes->items[k + 1];
        if (path->type != V_STR || data->type != V_STR) continue;
        char *decoded = malloc(data->n + 1);
        if (!decoded) abort();
        long len = b64_decode(data->s, data->n, decoded);
        int failed = 0, number = EIO;
        const char *reason = "Incorrect padding";
        if (len < 0) failed = 1;
        else if (put(path->s, decoded, (size_t)len)) { failed = 1; number = errno; reason = strerror(errno); }
        free(decoded);
        if (failed) {
            Buf inner = {0}, message = {0}, reply = {0};
            buf_str(&inner, path->s); buf_str(&inner, ": "); buf_str(&inner, reason);
            buf_str(&message, "agentcompass: cannot write "); buf_str(&message, path->s);
            buf_str(&message, " ("); buf_add(&message, inner.p, inner.n); buf_str(&message, ")");
            buf_fmt(&reply, "{\"error\":{\"errno\":%d,\"message\":", number);
            json_str(&reply, message.p, message.n);
            buf_str(&reply, ",\"path\":"); json_cstr(&reply, path->s);
            buf_str(&reply, ",\"batched\":true}}");
            send_reply(fd, &reply);
            free(inner.p); free(message.p);
            return 0;
        }
    }
    return 1;
}

static void do_read(int fd, const char *path) {
    Buf reply = {0};
    int file = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (file >= 0 && fstat(file, &st) == 0 && S_ISDIR(st.st_mode)) { close(file); file = -1; errno = EISDIR; }
    if (file < 0) {
        error_reply(&reply, errno, path, strerror(errno));
        send_reply(fd, &reply);
        return;
    }
    char *chunk = malloc(MAX_FRAME);
    if (!chunk) abort();
    for (;;) {
        ssize_t n = read(file, chunk, MAX_FRAME);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            error_reply(&reply, errno, path, strerror(errno));
            break;
        }
        if (n == 0) { buf_str(&reply, "{\"status\":0}"); break; }
        if (send_frame(fd, 'D', chunk, (size_t)n)) { free(chunk); close(file); return; }
    }
    free(chunk);
    close(file);
    send_reply(fd, &reply);
}

typedef struct { int fd; int error; } FileSink;

static int file_sink(void *context, const char *data, size_t n) {
    FileSink *f = context;
    while (f->fd >= 0 && !f->error && n) {
        ssize_t k = write(f->fd, data, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            f->error = errno;
            break;
        }
        data += k; n -= (size_t)k;
    }
    return 0;
}

static void do_write(int fd, const char *path) {
    FileSink f = {-1, 0};
    if (make_parent(path)) f.error = errno;
    else if ((f.fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666)) < 0) f.error = errno;
    int broke = receive_data(fd, file_sink, &f);
    if (f.fd >= 0 && close(f.fd) && !f.error) f.error = errno;
    if (broke) return;
    Buf reply = {0};
    if (f.error) error_reply(&reply, f.error, path, strerror(f.error));
    else buf_str(&reply, "{\"status\":0}");
    send_reply(fd, &reply);
}

typedef struct { int fd; Buf text; } Collect;

static void *collect(void *context) {
    Collect *c = context;
    char chunk[65536];
    ssize_t n;
    while ((n = read(c->fd, chunk, sizeof chunk)) != 0) {
        if (n < 0) {
            if (errno == EINTR) continue;
            break;
        }
        buf_add(&c->text, chunk, (size_t)n);
    }
    return NULL;
}

typedef struct { int fd; int broken; } PipeSink;

static int pipe_sink(void *context, const char *data, size_t n) {
    PipeSink *p = context;
    while (!p->broken && n) {
        ssize_t k = write(p->fd, data, n);
        if (k < 0) {
            if (errno == EINTR) continue;
            p->broken = 1; /* the tool stopped reading: the rest is drained unread */
            break;
        }
        data += k; n -= (size_t)k;
    }
    return 0;
}

/* Run a file tool (tar): its stdout as `D` frames, its stderr in the reply; with `feed`, stdin from `D`
 * frames. */
static void do_tool(int fd, char **argv, const char *cwd, const char *path, int feed) {
    int in[2] = {-1, -1}, out[2], err[2];
    Buf reply = {0};
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if ((feed && pipe2(in, O_CLOEXEC)) || pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) abort();
    SpawnPlan plan = {argv, NULL, cwd ? cwd : "/", {feed ? in[0] : devnull, out[1], err[1]}, 0};
    Waiter *w = spawn(&plan);
    int saved = errno;
    close(devnull);
    if (feed) close(in[0]);
    close(out[1]);
    close(err[1]);
    if (!w) {
        if (feed) { close(in[1]); receive_data(fd, NULL, NULL); }
        close(out[0]);
        close(err[0]);
        error_reply(&reply, saved, path, strerror(saved));
        send_reply(fd, &reply);
        return;
    }
    Collect errors = {err[0], {0}};
    pthread_t reader;
    pthread_create(&reader, NULL, collect, &errors);
    int broke = 0;
    if (feed) {
        PipeSink sink = {in[1], 0};
        broke = receive_data(fd, pipe_sink, &sink);
        close(in[1]);
    }
    char *chunk = malloc(MAX_FRAME);
    if (!chunk) abort();
    for (;;) {
        ssize_t n = read(out[0], chunk, MAX_FRAME);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        if (!broke && send_frame(fd, 'D', chunk, (size_t)n)) broke = 1;
    }
    free(chunk);
    close(out[0]);
    pthread_join(reader, NULL);
    close(err[0]);
    waiter_wait(w, -1);
    buf_fmt(&reply, "{\"status\":%d,\"stderr\":", w->status);
    json_str(&reply, errors.text.p ? errors.text.p : "", errors.text.n);
    buf_str(&reply, "}");
    free(errors.text.p);
    waiter_close(w);
    if (!broke) send_reply(fd, &reply);
    else free(reply.p);
}

/* -- exec ------------------------------------------------------------------------------------------------- */

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void spawn_error(int fd, const char *program, const char *cwd, int error) {
    struct stat st;
    Buf message = {0}, reply = {0};
    int status;
    if (stat(cwd, &st) || !S_ISDIR(st.st_mode)) {
        buf_str(&message, "agentcompass: cannot enter directory "); buf_str(&message, cwd);
        buf_str(&message, ": No such file or directory\n");
        status = 1;
    } else if (error == EACCES || error == EPERM) {
        buf_str(&message, "agentcompass: "); buf_str(&message, program); buf_str(&message, ": Permission denied\n");
        status = 126;
    } else {
        buf_str(&message, "agentcompass: "); buf_str(&message, program); buf_str(&message, ": not found\n");
        status = 127;
    }
    send_frame(fd, 'R', message.p, message.n);
    buf_fmt(&reply, "{\"status\":%d,\"oom\":[\"-\",\"-\"],\"cut\":[0,0],\"timed_out\":false}", status);
    send_reply(fd, &reply);
    free(message.p);
}

/* The environment of an exec: this process's, updated with `env`, and the exec's id. */
static char **exec_environment(Arena *arena, Val *env, const char *id) {
    size_t count = 0, extra = env && env->type == V_DICT ? env->n : 0;
    while (environ[count]) count++;
    char **out = arena_alloc(arena, (count + extra + 2) * sizeof(char *));
    size_t n = 0;
    for (size_t k = 0; k < count; k++) out[n++] = environ[k];
    for (size_t k = 0; k <= extra; k++) {
        const char *name, *value;
        if (k < extra) {
            Val *key = env->items[2 * k], *val = env->items[2 * k + 1];
            if (key->type != V_STR || val->type != V_STR) continue;
            name = key->s; value = val->s;
        } else {
            name = EXEC_ID_VARIABLE; value = id;
        }
        size_t len = strlen(name);
        char *entry = arena_alloc(arena, len + strlen(value) + 2);
        sprintf(entry, "%s=%s", name, value);
        size_t at = 0;
        while (at < n && !(strncmp(out[at], name, len) == 0 && out[at][len] == '=')) at++;
        out[at] = entry;
        if (at == n) n++;
    }
    out[n] = NULL;
    return out;
}

static void do_exec(int fd, Val *req, Arena *arena) {
    Val *argv_val = get(req, "argv"), *timeout_val = get(req, "timeout");
    const char *cwd = get_str(req, "cwd"), *id = get_str(req, "id");
    if (!argv_val || argv_val->type != V_LIST || !argv_val->n || !cwd || !id) return;
    char **argv = arena_alloc(arena, (argv_val->n + 1) * sizeof(char *));
    for (size_t k = 0; k < argv_val->n; k++) {
        if (argv_val->items[k]->type != V_STR) return;
        argv[k] = argv_val->items[k]->s;
    }
    argv[argv_val->n] = NULL;
    char marker[256];
    snprintf(marker, sizeof marker, "%s=%s", EXEC_ID_VARIABLE, id);
    char **envp = exec_environment(arena, get(req, "env"), id);
    int has_timeout = timeout_val && (timeout_val->type == V_INT || timeout_val->type == V_FLOAT);
    double timeout = !has_timeout ? 0 : timeout_val->type == V_INT ? (double)timeout_val->i : timeout_val->f;
    char oom_before[64], oom_after[64];
    oom_kills(oom_before, sizeof oom_before);
    int out[2], err[2];
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (pipe2(out, O_CLOEXEC) || pipe2(err, O_CLOEXEC)) abort();
    SpawnPlan plan = {argv, envp, cwd, {devnull, out[1], err[1]}, 1};
    Waiter *w = spawn(&plan);
    int saved = errno;
    close(devnull);
    close(out[1]);
    close(err[1]);
    if (!w) {
        close(out[0]);
        close(err[0]);
        spawn_error(fd, argv[0], cwd, saved);
        return;
    }
    double started = now();
    double deadline = has_timeout ? started + timeout : 0;
    Pipes pipes = {{{0}}, 0};
    int streams[2] = {out[0], err[0]};
    for (int k = 0; k < 2; k++) {
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", streams[k]);
        ssize_t n = readlink(link, pipes.name[pipes.count], sizeof pipes.name[0] - 1);
        if (n > 0) pipes.name[pipes.count++][n] = 0;
        fcntl(streams[k], F_SETFL, O_NONBLOCK);
    }
    size_t sent[2] = {0, 0}, cut[2] = {0, 0};
    int open_streams[2] = {1, 1};
    int timed_out = 0, cancelled = 0, listening = 1;
    double kill_deadline = -1;
    char *chunk = malloc(65536);
    if (!chunk) abort();
    while (open_streams[0] || open_streams[1] || !waiter_done(w)) {
        double t = now();
        if (kill_deadline < 0 && (cancelled || (has_timeout && t >= deadline))) {
            timed_out = !cancelled;
            kill_tree(w->pid, marker, &pipes);
            kill_deadline = now() + KILL_GRACE;
        } else if (kill_deadline >= 0 && t >= kill_deadline) {
            break;
        }
        double wait;
        if (kill_deadline >= 0) wait = 0.05;
        else if (has_timeout) wait = deadline - t < 0 ? 0 : deadline - t > 1.0 ? 1.0 : deadline - t;
        else wait = 1.0;
        struct pollfd fds[4];
        int nfds = 0, at_out = -1, at_err = -1, at_conn = -1;
        if (open_streams[0]) { at_out = nfds; fds[nfds++] = (struct pollfd){out[0], POLLIN, 0}; }
        if (open_streams[1]) { at_err = nfds; fds[nfds++] = (struct pollfd){err[0], POLLIN, 0}; }
        if (listening) { at_conn = nfds; fds[nfds++] = (struct pollfd){fd, POLLIN, 0}; }
        if (!waiter_done(w)) fds[nfds++] = (struct pollfd){w->fd[0], POLLIN, 0}; /* the child's end */
        if (!open_streams[0] && !open_streams[1] && wait > 0.05) wait = 0.05;
        int ready = poll(fds, (nfds_t)nfds, (int)(wait * 1000 + 0.999));
        if (ready <= 0) continue;
        if (at_conn >= 0 && fds[at_conn].revents) {
            char data[64];
            ssize_t n = recv(fd, data, sizeof data, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR) || (n > 0 && data[0] == 'C')) {
                cancelled = 1;
                listening = 0;
            }
        }
        int indexes[2] = {at_out, at_err};
        for (int s = 0; s < 2; s++) {
            if (indexes[s] < 0 || !fds[indexes[s]].revents) continue;
            ssize_t n = read(streams[s], chunk, 65536);
            if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
            if (n <= 0) { open_streams[s] = 0; continue; }
            size_t room = OUTPUT_LIMIT > sent[s] ? OUTPUT_LIMIT - sent[s] : 0;
            size_t keep = (size_t)n < room ? (size_t)n : room;
            cut[s] += (size_t)n - keep;
            if (keep) {
                sent[s] += keep;
                if (send_frame(fd, s ? 'R' : 'O', chunk, keep)) { /* the host is gone: nobody waits for it */
                    cancelled = 1;
                    listening = 0;
                }
            }
        }
    }
    free(chunk);
    close(out[0]);
    close(err[0]);
    if (!waiter_done(w)) {
        kill_tree(w->pid, marker, &pipes);
        waiter_wait(w, KILL_GRACE);
    }
    int status = waiter_done(w) ? w->status : 137;
    oom_kills(oom_after, sizeof oom_after);
    Buf reply = {0};
    buf_fmt(&reply, "{\"status\":%d,\"oom\":[", status);
    json_cstr(&reply, oom_before);
    buf_str(&reply, ",");
    json_cstr(&reply, oom_after);
    buf_fmt(&reply, "],\"cut\":[%zu,%zu],\"timed_out\":%s,\"cancelled\":%s}", cut[0], cut[1],
            timed_out ? "true" : "false", cancelled ? "true" : "false");
    send_reply(fd, &reply);
    if (waiter_done(w)) waiter_close(w);
    /* else: the reaper still holds it (a process that outlived SIGKILL's grace); it is leaked on purpose */
}

static void do_shutdown(int fd) {
    Buf reply = {0};
    if (!under_keeper()) {
        buf_fmt(&reply, "{\"error\":{\"errno\":%d,\"message\":\"not the keeper's server: no shutdown\"}}", EPERM);
        send_reply(fd, &reply);
        return;
    }
    Belongs all = {0, NULL, NULL};
    int spare[] = {1, getpid(), getppid()};
    kill_matching(&all, spare, 3);
    buf_str(&reply, "{\"status\":0}");
    send_reply(fd, &reply);
    close(fd);
    _exit(SHUTDOWN_STATUS);
}

/* -- serving ---------------------------------------------------------------------------------------------- */

static void handle(int fd) {
    char kind, *payload;
    size_t n;
    if (recv_frame(fd, &kind, &payload, &n)) return;
    if (kind != 'Q') { free(payload); return; }
    Arena arena = {0};
    Reader r = {(unsigned char *)payload, (unsigned char *)payload + n, &arena, NULL, 0, 0, 0};
    Val *req = rd_value(&r);
    free(r.refs);
    const char *op = get_str(req, "op");
    if (!op) { free(payload); arena_free(&arena); return; }
    Val *writes = get(req, "writes");
    Buf reply = {0};
    if (!apply_writes(fd, writes)) {
        if (strcmp(op, "write") == 0 || strcmp(op, "untar") == 0) receive_data(fd, NULL, NULL);
    } else if (writes && writes->type == V_LIST && writes->n && send_frame(fd, 'W', "", 0)) {
        /* the host is gone */
    } else if (strcmp(op, "exec") == 0) {
        do_exec(fd, req, &arena);
    } else if (strcmp(op, "read") == 0 && get_str(req, "path")) {
        do_read(fd, get_str(req, "path"));
    } else if (strcmp(op, "write") == 0 && get_str(req, "path")) {
        do_write(fd, get_str(req, "path"));
    } else if (strcmp(op, "puts") == 0) {
        buf_str(&reply, "{\"status\":0}");
        send_reply(fd, &reply);
    } else if (strcmp(op, "untar") == 0 && get_str(req, "dir")) {
        const char *dir = get_str(req, "dir");
        if (make_dirs(dir)) {
            int saved = errno;
            receive_data(fd, NULL, NULL);
            error_reply(&reply, saved, dir, strerror(saved));
            send_reply(fd, &reply);
        } else {
            char *argv[] = {"tar", "-x", "-f", "-", "-C", (char *)dir, NULL};
            do_tool(fd, argv, get_str(req, "cwd"), dir, 1);
        }
    } else if (strcmp(op, "tar") == 0 && get_str(req, "path")) {
        const char *path = get_str(req, "path");
        struct stat st;
        if (lstat(path, &st)) {
            error_reply(&reply, ENOENT, path, "No such file or directory");
            send_reply(fd, &reply);
        } else {
            char *parent = strdup(path), *base;
            char *slash = strrchr(parent, '/');
            if (!slash) { base = parent; parent = strdup("/"); }
            else {
                base = strdup(slash + 1);
                if (slash == parent) slash[1] = 0;
                else *slash = 0;
            }
            char *argv[] = {"tar", "-c", "-f", "-", "--", base, NULL};
            do_tool(fd, argv, parent, path, 0);
            free(parent);
            free(base);
        }
    } else if (strcmp(op, "ping") == 0) {
        buf_fmt(&reply, "{\"status\":0,\"pid\":%d}", (int)getpid());
        send_reply(fd, &reply);
    } else if (strcmp(op, "shutdown") == 0) {
        do_shutdown(fd);
    } else {
        Buf message = {0};
        buf_str(&message, "unknown request '");
        buf_str(&message, op);
        buf_str(&message, "'");
        buf_fmt(&reply, "{\"error\":{\"errno\":%d,\"message\":", EINVAL);
        json_str(&reply, message.p, message.n);
        buf_str(&reply, "}}");
        free(message.p);
        send_reply(fd, &reply);
    }
    free(reply.p);
    free(payload);
    arena_free(&arena);
}

static void *serve(void *context) {
    int fd = (int)(intptr_t)context;
    handle(fd);
    close(fd);
    return NULL;
}

/* -- the gateway forwarder: TCP 127.0.0.1:PORT to a Unix socket ------------------------------------------- */

typedef struct { int source, sink, other; } Pump;

static void pump(int source, int sink) {
    char data[65536];
    for (;;) {
        ssize_t n = recv(source, data, sizeof data, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) break;
        if (n == 0) { shutdown(sink, SHUT_WR); return; }
        if (send_all(sink, data, (size_t)n)) break;
    }
    shutdown(source, SHUT_RDWR); /* one side broke: unblock the other direction too */
    shutdown(sink, SHUT_RDWR);
}

static void *pump_back(void *context) {
    Pump *p = context;
    pump(p->source, p->sink);
    return NULL;
}

static const char *gateway_path;

static void *forward(void *context) {
    int client = (int)(intptr_t)context;
    int upstream = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    snprintf(address.sun_path, sizeof address.sun_path, "%s", gateway_path);
    if (upstream < 0 || connect(upstream, (struct sockaddr *)&address, sizeof address)) {
        close(client);
        if (upstream >= 0) close(upstream);
        return NULL;
    }
    Pump back = {upstream, client, 0};
    pthread_t thread;
    pthread_create(&thread, NULL, pump_back, &back);
    pump(client, upstream);
    pthread_join(thread, NULL);
    close(client);
    close(upstream);
    return NULL;
}

static pthread_attr_t detached;

static void start_thread(void *(*target)(void *), void *argument) {
    pthread_t thread;
    while (pthread_create(&thread, &detached, target, argument)) usleep(10000);
}

static void accept_forever(int server, void *(*target)(void *)) {
    for (;;) {
        int fd = accept4(server, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EINTR) usleep(10000); /* out of file descriptors, say: try again */
            continue;
        }
        start_thread(target, (void *)(intptr_t)fd);
    }
}

static void *accept_tcp(void *context) {
    accept_forever((int)(intptr_t)context, forward);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s SOCKET [GATEWAY_SOCKET PORT]\n", argv[0]);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    pthread_attr_init(&detached);
    pthread_attr_setdetachstate(&detached, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&detached, 256 * 1024);
    const char *path = argv[1];
    if (argc >= 4) {
        gateway_path = argv[2];
        int tcp = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int one = 1;
        setsockopt(tcp, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(argv[3]))};
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (tcp < 0 || bind(tcp, (struct sockaddr *)&address, sizeof address) || listen(tcp, 128)) {
            perror("ac-exec-server: the gateway port");
            return 1;
        }
        start_thread(accept_tcp, (void *)(intptr_t)tcp);
    }
    unlink(path);
    struct sockaddr_un address = {.sun_family = AF_UNIX};
    char fresh[sizeof address.sun_path];
    if (snprintf(fresh, sizeof fresh, "%s.new", path) >= (int)sizeof fresh) {
        fprintf(stderr, "ac-exec-server: socket path too long\n");
        return 1;
    }
    snprintf(address.sun_path, sizeof address.sun_path, "%s", fresh);
    int server = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (server < 0 || bind(server, (struct sockaddr *)&address, sizeof address) || chmod(fresh, 0600)
        || listen(server, 128) || rename(fresh, path)) { /* the socket appears only once it accepts */
        perror("ac-exec-server: the socket");
        return 1;
    }
    prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); /* orphans of an exec become ours: a timeout still finds them */
    start_thread(reaper, NULL);
    accept_forever(server, serve);
    return 0;
}
