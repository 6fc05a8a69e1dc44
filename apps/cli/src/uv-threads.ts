// Imported first by the bin, before anything can use libuv's thread pool (its size is read once,
// at first use). Every file read, write and fsync runs on that pool, and a file:// put keeps a
// background flush of its file in flight (@ckpt/object-store), holding one thread while the disk
// works: with libuv's default of 4, two files put at once left two threads for all other I/O.
// A user's own UV_THREADPOOL_SIZE wins.
process.env.UV_THREADPOOL_SIZE ??= "8";
