/*
 * loop_io.c - hiredis on a loop adapter's fd watch (loop_io.h).
 */
#include "store/redis/loop_io.h"

static void watch_set(weir__redis_io *io, unsigned events)
{
    if (events == io->events || !io->watch)
        return;
    io->events = events;
    io->loop->io_update(io->loop->data, io->watch, events);
}

static void ev_add_read(void *p)
{
    weir__redis_io *io = p;
    watch_set(io, io->events | WEIR_IO_READ);
}

static void ev_del_read(void *p)
{
    weir__redis_io *io = p;
    watch_set(io, io->events & ~WEIR_IO_READ);
}

static void ev_add_write(void *p)
{
    weir__redis_io *io = p;
    watch_set(io, io->events | WEIR_IO_WRITE);
}

static void ev_del_write(void *p)
{
    weir__redis_io *io = p;
    watch_set(io, io->events & ~WEIR_IO_WRITE);
}

static void ev_cleanup(void *p)
{
    weir__redis_io *io = p;
    if (io->watch) {
        io->loop->io_stop(io->loop->data, io->watch);
        io->watch = NULL;
        io->events = 0;
    }
}

static void on_io(void *arg, unsigned ready)
{
    weir__redis_io *io = arg;
    redisAsyncContext *ac = *io->acp;
    if (ac && (ready & WEIR_IO_READ))
        redisAsyncHandleRead(ac);
    /* reading may have dropped the connection */
    if (ac && *io->acp == ac && (ready & WEIR_IO_WRITE))
        redisAsyncHandleWrite(ac);
}

bool weir__redis_io_attach(weir__redis_io *io, const weir_loop_adapter *loop, redisAsyncContext *ac,
                           redisAsyncContext *const *acp)
{
    io->loop = loop;
    io->acp = acp;
    io->events = 0;
    io->watch = loop->io_start(loop->data, ac->c.fd, 0, on_io, io);
    if (!io->watch)
        return false;
    loop->unref(loop->data, io->watch);
    ac->ev.data = io;
    ac->ev.addRead = ev_add_read;
    ac->ev.delRead = ev_del_read;
    ac->ev.addWrite = ev_add_write;
    ac->ev.delWrite = ev_del_write;
    ac->ev.cleanup = ev_cleanup;
    return true;
}
