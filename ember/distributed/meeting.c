/* meeting.c: the guard's meeting at a collective, in C (see guard.py).
 *
 * The same messages as the guard's Python path, on its control communicator: each
 * process sends every peer its signature (SIGNATURE bytes) and the collective's small
 * data, receives theirs into slots of INLINE + SIGNATURE bytes, and compares signatures.
 * A meeting here costs about what MPI's own small Allreduce does; through mpi4py,
 * message by message, it cost several times that. Waiting is bounded: after a short
 * spin the call returns PENDING, and the guard goes on polling (ember_meeting_poll)
 * while it reads failure notices and watches the timeout.
 *
 * Once every peer's signature has come and agrees, the data of every process, this
 * one's included, goes to `out` in the order of `ranks`: stacked, or summed row by row
 * in that order (the same additions, in the same order, as NumPy's in guard.py), so
 * the result is bitwise the same on every process whichever meeting it used.
 *
 * A meeting starts with ember_meeting_call, which takes the CPU backend launcher's
 * calling convention (launcher.c): a small collective then costs one builtin call.
 */
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <time.h>

#define BUSY_SECONDS 50e-6

enum { DONE = 0, PENDING = -1 };  /* else 1 + a peer's rank (mismatch), or -2 - code */

/* What happens to the data at the end: stacked, or summed as one of these types. */
enum { STACK = 0, SUM_F32, SUM_F64, SUM_U8, SUM_U16, SUM_U32, SUM_U64 };

/* A meeting's message (signature, then data), sent to every peer from one copy. */
typedef struct {
    int64_t sends;                  /* in flight */
    char bytes[];
} Message;

typedef struct {
    MPI_Request request;
    Message *message;
} Send;

typedef struct {
    MPI_Comm comm;
    int rank, tag;
    int64_t signature, slot;        /* bytes: a signature; a receive slot */
    char **slots;                   /* per process, made at its first meeting */
    MPI_Request *receives;          /* per process; MPI_REQUEST_NULL when none */
    Send *sends;                    /* in flight, with their messages */
    int64_t sends_used, sends_size;
    char *record;                   /* this meeting's signature */
    /* the meeting in progress */
    const int32_t *ranks;
    int64_t count, payload;
    const char *mine;
    char *out;
    int64_t fold, rows;             /* STACK or a sum of `rows` rows per process */
} Meeting;

Meeting *ember_meeting_new(int64_t comm_handle, int64_t size, int64_t tag,
                           int64_t signature, int64_t inline_bytes)
{
    Meeting *m = calloc(1, sizeof(Meeting));
    if (m == NULL)
        return NULL;
    m->comm = (MPI_Comm)(intptr_t)comm_handle;
    MPI_Comm_rank(m->comm, &m->rank);
    m->tag = (int)tag;
    m->signature = signature;
    m->slot = signature + inline_bytes;
    m->slots = calloc((size_t)size, sizeof(char *));
    m->receives = malloc(sizeof(MPI_Request) * (size_t)size);
    m->record = malloc((size_t)signature);
    if (m->slots == NULL || m->receives == NULL || m->record == NULL) {
        free(m->slots);
        free(m->receives);
        free(m->record);
        free(m);
        return NULL;
    }
    for (int64_t i = 0; i < size; ++i)
        m->receives[i] = MPI_REQUEST_NULL;
    return m;
}

/* Peer `rank`'s slot: its signature, then its data (NULL before its first meeting). */
char *ember_meeting_slot(Meeting *m, int64_t rank) { return m->slots[rank]; }

static int64_t error_status(int code) { return -2 - (int64_t)code; }

/* Forget the sends that have completed (their peers have the messages). */
static int64_t prune_sends(Meeting *m)
{
    int64_t kept = 0;
    for (int64_t i = 0; i < m->sends_used; ++i) {
        int done = 0;
        if (MPI_Test(&m->sends[i].request, &done, MPI_STATUS_IGNORE) != MPI_SUCCESS)
            done = 1;  /* to a process that is gone: nothing left to deliver */
        if (done) {
            if (--m->sends[i].message->sends == 0)
                free(m->sends[i].message);
        } else
            m->sends[kept++] = m->sends[i];
    }
    m->sends_used = kept;
    return kept;
}

static int64_t send_to(Meeting *m, Message *message, int peer)
{
    if (m->sends_used == m->sends_size) {
        int64_t size = m->sends_size ? 2 * m->sends_size : 16;
        Send *grown = realloc(m->sends, sizeof(Send) * (size_t)size);
        if (grown == NULL)
            return error_status(MPI_ERR_NO_MEM);
        m->sends = grown;
        m->sends_size = size;
    }
    Send *s = &m->sends[m->sends_used];
    int code = MPI_Isend(message->bytes, (int)(m->signature + m->payload), MPI_BYTE, peer,
                         m->tag, m->comm, &s->request);
    if (code != MPI_SUCCESS)
        return error_status(code);
    s->message = message;
    message->sends += 1;
    m->sends_used += 1;
    return DONE;
}

/* Send this process's message to every peer of the meeting: one copy, kept until
 * every send of it has completed (the caller's data may change once we return). */
static int64_t send_all(Meeting *m)
{
    if (m->count < 2)
        return DONE;
    Message *message = malloc(sizeof(Message) + (size_t)(m->signature + m->payload));
    if (message == NULL)
        return error_status(MPI_ERR_NO_MEM);
    message->sends = 0;
    memcpy(message->bytes, m->record, (size_t)m->signature);
    if (m->payload)
        memcpy(message->bytes + m->signature, m->mine, (size_t)m->payload);
    int64_t status = DONE;
    for (int64_t i = 0; i < m->count && status == DONE; ++i)
        if (m->ranks[i] != m->rank)
            status = send_to(m, message, m->ranks[i]);
    if (message->sends == 0)
        free(message);
    return status;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Test the receives still pending; DONE when none is, else PENDING, a mismatch or an
 * error. */
static int64_t arrivals(Meeting *m)
{
    int64_t waiting = 0;
    for (int64_t i = 0; i < m->count; ++i) {
        int peer = m->ranks[i];
        if (peer == m->rank || m->receives[peer] == MPI_REQUEST_NULL)
            continue;
        int done = 0;
        int code = MPI_Test(&m->receives[peer], &done, MPI_STATUS_IGNORE);
        if (code != MPI_SUCCESS)
            return error_status(code);
        if (!done) {
            waiting += 1;
            continue;
        }
        if (memcmp(ember_meeting_slot(m, peer), m->record, (size_t)m->signature) != 0)
            return 1 + (int64_t)peer;
    }
    return waiting ? PENDING : DONE;
}

/* Process i's data (i in the order of `ranks`). */
static const char *data_of(const Meeting *m, int64_t i)
{
    int peer = m->ranks[i];
    return peer == m->rank ? m->mine : m->slots[peer] + m->signature;
}

/* out = row 0 + row 1, then + row 2, ...: every process's rows in the order of ranks.
 * One pass per row, as NumPy does it (the compiler may not reorder float additions). */
#define SUM_ROWS(type)                                                                  \
    do {                                                                                \
        int64_t n = m->payload / m->rows / (int64_t)sizeof(type);                       \
        type *out = (type *)m->out;                                                     \
        int first = 1;                                                                  \
        for (int64_t i = 0; i < m->count; ++i)                                          \
            for (int64_t r = 0; r < m->rows; ++r) {                                     \
                const type *row = (const type *)data_of(m, i) + r * n;                  \
                if (first)                                                              \
                    memcpy(out, row, (size_t)n * sizeof(type));                         \
                else                                                                    \
                    for (int64_t k = 0; k < n; ++k)                                     \
                        out[k] = (type)(out[k] + row[k]);                               \
                first = 0;                                                              \
            }                                                                           \
    } while (0)

/* The meeting's data to `out`, stacked or summed. */
static void deliver(Meeting *m)
{
    if (m->payload == 0)
        return;
    switch (m->fold) {
    case STACK:
        for (int64_t i = 0; i < m->count; ++i)
            memcpy(m->out + i * m->payload, data_of(m, i), (size_t)m->payload);
        break;
    case SUM_F32: SUM_ROWS(float); break;
    case SUM_F64: SUM_ROWS(double); break;
    case SUM_U8: SUM_ROWS(uint8_t); break;  /* (integers wrap, as NumPy's do) */
    case SUM_U16: SUM_ROWS(uint16_t); break;
    case SUM_U32: SUM_ROWS(uint32_t); break;
    case SUM_U64: SUM_ROWS(uint64_t); break;
    }
}

/* Continue the meeting for up to `spin_seconds`: busy at first (peers usually come
 * within microseconds), then yielding the core (there may be more processes than
 * cores). */
int64_t ember_meeting_poll(Meeting *m, double spin_seconds)
{
    double start = 0.0;
    for (;;) {
        int64_t status = arrivals(m);
        if (status != PENDING) {
            if (status == DONE) {
                deliver(m);
                prune_sends(m);
            }
            return status;
        }
        if (start == 0.0) {
            start = now();
            continue;
        }
        double waited = now() - start;
        if (waited > spin_seconds)
            return PENDING;
        if (waited > BUSY_SECONDS)
            sched_yield();
    }
}

/* Start the meeting of the processes `ranks` (this one among them) at collective
 * number `seq`, whose signature is the decimal `seq` followed by `tail` (padded with
 * NULs to the signature's size, as guard.py's _record makes it), sending `payload`
 * bytes of `mine`; then poll as above. */
static int64_t start(Meeting *m, const int32_t *ranks, int64_t count, int64_t seq,
                     const char *tail, const char *mine, int64_t payload, char *out,
                     int64_t fold, int64_t rows, double spin_seconds)
{
    int digits = snprintf(m->record, (size_t)m->signature, "%lld", (long long)seq);
    memcpy(m->record + digits, tail, (size_t)(m->signature - digits));
    m->ranks = ranks;
    m->count = count;
    m->mine = mine;
    m->payload = payload;
    m->out = out;
    m->fold = fold;
    m->rows = rows > 0 ? rows : 1;
    for (int64_t i = 0; i < count; ++i) {
        int peer = ranks[i];
        if (peer == m->rank)
            continue;
        if (m->slots[peer] == NULL && (m->slots[peer] = malloc((size_t)m->slot)) == NULL)
            return error_status(MPI_ERR_NO_MEM);
        int code = MPI_Irecv(m->slots[peer], (int)m->slot, MPI_BYTE, peer, m->tag,
                             m->comm, &m->receives[peer]);
        if (code != MPI_SUCCESS)
            return error_status(code);
    }
    int64_t status = send_all(m);
    return status != DONE ? status : ember_meeting_poll(m, spin_seconds);
}

/* The arguments of ember_meeting_call, in the launcher's list: addresses or integers. */
enum { ARG_STATE, ARG_RANKS, ARG_COUNT, ARG_SEQ, ARG_TAIL, ARG_MINE, ARG_PAYLOAD, ARG_OUT,
       ARG_FOLD, ARG_ROWS, ARG_SPIN_NS, ARG_STATUS };

#define INTEGER(i) ((int64_t)(intptr_t)a[i])

/* Start a meeting (the launcher's `segment` is not used); its status goes to
 * *a[ARG_STATUS]. */
void ember_meeting_call(void **a, int64_t segment)
{
    (void)segment;
    *(int64_t *)a[ARG_STATUS] = start(
        a[ARG_STATE], a[ARG_RANKS], INTEGER(ARG_COUNT), INTEGER(ARG_SEQ), a[ARG_TAIL],
        a[ARG_MINE], INTEGER(ARG_PAYLOAD), a[ARG_OUT], INTEGER(ARG_FOLD), INTEGER(ARG_ROWS),
        1e-9 * (double)INTEGER(ARG_SPIN_NS));
}

/* How many of the meeting's peers have not come yet; their ranks go to `out`. */
int64_t ember_meeting_pending(Meeting *m, int32_t *out)
{
    int64_t n = 0;
    for (int64_t i = 0; i < m->count; ++i) {
        int peer = m->ranks[i];
        if (peer != m->rank && m->receives[peer] != MPI_REQUEST_NULL)
            out[n++] = peer;
    }
    return n;
}
