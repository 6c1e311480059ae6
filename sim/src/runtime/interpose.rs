//! Interposition of the libc calls through which a process observes randomness and time.
//!
//! This module defines `getrandom`, `getentropy`, `clock_gettime`, `gettimeofday` and `time` in
//! the binary that links `sim`. The dynamic linker binds every caller in the process to these
//! definitions instead of glibc's: std's `RandomState` and `fill_bytes` (a weak reference bound at
//! link time), the `getrandom` crate (which looks `getrandom` up with `dlsym(RTLD_DEFAULT)`:
//! rand, uuid, ahash), `std::time::{Instant, SystemTime}`, chrono, and C libraries that call
//! them.
//!
//! On a thread running a simulation (armed with [`Armed`]), the calls are answered from the run:
//! - `getrandom`/`getentropy`: bytes from the run's `runtime/getrandom` ChaCha8 stream;
//! - `CLOCK_MONOTONIC` (and `_RAW`, `_COARSE`, `CLOCK_BOOTTIME`): a base drawn from the seed plus
//!   the fake time elapsed on tokio's paused clock, so `std::time::Instant` and
//!   `tokio::time::Instant` agree;
//! - `CLOCK_REALTIME` (and `_COARSE`, `CLOCK_TAI`), `gettimeofday`, `time`: a simulated epoch
//!   drawn from the seed plus the same elapsed fake time.
//!
//! Everywhere else (other threads, tests without a simulation, CPU-time clocks) the calls pass
//! through to glibc's own functions, found once with `dlsym(RTLD_NEXT)`: the cost is one
//! thread-local read.
//!
//! `syscall(3)` is interposed too (x86-64 and AArch64 Linux), for the `getrandom` system call made
//! through it: `getrandom` 0.2 — what rand 0.8's `thread_rng`, `ring` and the `backoff` crate's
//! jitter draw from — calls `libc::syscall(SYS_getrandom, ..)` instead of glibc's `getrandom`.
//! On a simulation thread that number is answered from the run's stream; every other number, and
//! every call on other threads, goes to glibc's `syscall` with the caller's registers (std's
//! futexes pass through here: the cost is one compare). Not covered: a system call made with an
//! inline `syscall` instruction, reads of `/dev/urandom`, or reads of the vDSO directly; such code
//! keeps real randomness and the run can only "replay k of n".

use std::cell::Cell;
use std::ffi::{c_int, c_long, c_uint, c_void};
use std::ptr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use rand_core::{Rng, SeedableRng};

use crate::seed::Seed;

const NANOS_PER_SEC: u64 = 1_000_000_000;

/// What one simulation thread answers, and what it counted.
pub(crate) struct ThreadSim {
    rng: std::cell::RefCell<ChaCha8Rng>,
    monotonic_base_nanos: u64,
    realtime_base_nanos: u64,
    /// tokio's clock at the start of the run, as a std `Instant`; set while the run is live.
    start: Cell<Option<std::time::Instant>>,
    /// The fake time last answered; frozen outside the live window.
    last_elapsed_nanos: Cell<u64>,
    busy: Cell<bool>,
    pub(crate) getrandom_calls: Cell<u64>,
    pub(crate) getrandom_bytes: Cell<u64>,
    pub(crate) clock_reads: Cell<u64>,
}

impl ThreadSim {
    /// The answers for a run with this seed: the monotonic base is an uptime in 1 hour..100 days,
    /// the epoch a time in 2020..2030 (both at nanosecond resolution).
    pub(crate) fn new(seed: Seed) -> ThreadSim {
        let mut clock = seed.path("runtime/clock").source();
        let monotonic_base_nanos = clock.range(3_600 * NANOS_PER_SEC..=100 * 86_400 * NANOS_PER_SEC);
        const EPOCH_2020: u64 = 1_577_836_800;
        const EPOCH_2030: u64 = 1_893_456_000;
        let realtime_base_nanos = clock.range(EPOCH_2020 * NANOS_PER_SEC..=EPOCH_2030 * NANOS_PER_SEC);
        ThreadSim {
            rng: std::cell::RefCell::new(ChaCha8Rng::from_seed(seed.path("runtime/getrandom").bytes32())),
            monotonic_base_nanos,
            realtime_base_nanos,
            start: Cell::new(None),
            last_elapsed_nanos: Cell::new(0),
            busy: Cell::new(false),
            getrandom_calls: Cell::new(0),
            getrandom_bytes: Cell::new(0),
            clock_reads: Cell::new(0),
        }
    }

    /// The simulated epoch: `SystemTime` at the start of the run.
    pub(crate) fn epoch(&self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH + Duration::from_nanos(self.realtime_base_nanos)
    }

    /// From now on, read elapsed time from tokio's clock (`start` is its value at fake time 0).
    pub(crate) fn go_live(&self, start: std::time::Instant) {
        self.start.set(Some(start));
    }

    /// Freeze the clock at the last value answered (the runtime is about to be dropped).
    pub(crate) fn freeze(&self) {
        self.start.set(None);
    }

    fn elapsed_nanos(&self) -> u64 {
        if let Some(start) = self.start.get()
            && !self.busy.replace(true)
        {
            // tokio answers from its paused clock without reading the OS clock while a runtime
            // context is entered; otherwise it reads std `Instant` (our own hook, which then
            // finds `busy` set and answers the last value).
            let since = super::elapsed_since(tokio::time::Instant::from_std(start));
            self.busy.set(false);
            let elapsed = u64::try_from(since.as_nanos()).unwrap_or(u64::MAX);
            if elapsed > self.last_elapsed_nanos.get() {
                self.last_elapsed_nanos.set(elapsed);
            }
        }
        self.last_elapsed_nanos.get()
    }

    fn fill(&self, buf: &mut [u8]) -> bool {
        match self.rng.try_borrow_mut() {
            Ok(mut rng) => {
                rng.fill_bytes(buf);
                self.getrandom_calls.set(self.getrandom_calls.get() + 1);
                self.getrandom_bytes.set(self.getrandom_bytes.get() + buf.len() as u64);
                true
            }
            Err(_) => false,
        }
    }
}

thread_local! {
    /// The simulation armed on this thread, if any. A raw pointer in a `const` cell: no
    /// destructor, so it can be read at any point of the thread's life, even during TLS teardown.
    static CURRENT: Cell<*const ThreadSim> = const { Cell::new(ptr::null()) };
}

/// Arms the interposition on this thread for as long as the guard lives.
pub(crate) struct Armed<'a> {
    _sim: &'a ThreadSim,
}

impl<'a> Armed<'a> {
    pub(crate) fn new(sim: &'a ThreadSim) -> Armed<'a> {
        let previous = CURRENT.with(|c| c.replace(sim as *const ThreadSim));
        assert!(previous.is_null(), "a simulation is already armed on this thread");
        Armed { _sim: sim }
    }
}

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(ptr::null()));
    }
}

/// Whether the calling thread runs a simulation with interposition armed.
pub fn is_simulation_thread() -> bool {
    CURRENT.try_with(|c| !c.get().is_null()).unwrap_or(false)
}

fn with_current<R>(f: impl FnOnce(&ThreadSim) -> R) -> Option<R> {
    let sim = CURRENT.try_with(Cell::get).ok()?;
    if sim.is_null() {
        return None;
    }
    // SAFETY: the pointer is set by `Armed::new` from a reference that outlives the guard, and
    // cleared when the guard drops; it is only read on the thread that set it.
    Some(f(unsafe { &*sim }))
}

/// Looks up the next definition of `name` after this binary (glibc's), once.
fn real_symbol(cache: &AtomicUsize, name: &std::ffi::CStr) -> usize {
    let cached = cache.load(Ordering::Relaxed);
    if cached != 0 {
        return cached;
    }
    // SAFETY: dlsym with a valid NUL-terminated name; RTLD_NEXT is valid from a shared object or
    // executable that has a next object in its lookup scope.
    let found = unsafe { libc::dlsym(libc::RTLD_NEXT, name.as_ptr()) } as usize;
    cache.store(found, Ordering::Relaxed);
    found
}

fn set_errno(value: c_int) {
    // SAFETY: __errno_location returns this thread's errno slot.
    unsafe { *libc::__errno_location() = value };
}

fn write_timespec(tp: *mut libc::timespec, nanos: u64) {
    if tp.is_null() {
        return;
    }
    // SAFETY: the caller passed a pointer to a timespec it owns (clock_gettime's contract).
    unsafe {
        (*tp).tv_sec = (nanos / NANOS_PER_SEC) as libc::time_t;
        (*tp).tv_nsec = (nanos % NANOS_PER_SEC) as c_long;
    }
}

/// `getrandom(2)`: answered from the run's stream on a simulation thread.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes (the libc contract).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getrandom(buf: *mut c_void, len: libc::size_t, flags: c_uint) -> libc::ssize_t {
    if len > 0 && !buf.is_null() {
        // SAFETY: per the libc contract, buf is valid for len bytes.
        let slice = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        if with_current(|sim| sim.fill(slice)) == Some(true) {
            return len as libc::ssize_t;
        }
    }
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let real = real_symbol(&REAL, c"getrandom");
    if real == 0 {
        // SAFETY: the raw system call with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_getrandom, buf, len, flags) } as libc::ssize_t;
    }
    type F = unsafe extern "C" fn(*mut c_void, libc::size_t, c_uint) -> libc::ssize_t;
    // SAFETY: `real` is glibc's getrandom, with this signature.
    unsafe { std::mem::transmute::<usize, F>(real)(buf, len, flags) }
}

/// `getentropy(3)`: answered from the run's stream on a simulation thread.
///
/// # Safety
/// `buf` must be valid for `len` bytes of writes (the libc contract).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn getentropy(buf: *mut c_void, len: libc::size_t) -> c_int {
    if len > 256 {
        set_errno(libc::EIO);
        return -1;
    }
    if len > 0 && !buf.is_null() {
        // SAFETY: per the libc contract, buf is valid for len bytes.
        let slice = unsafe { std::slice::from_raw_parts_mut(buf.cast::<u8>(), len) };
        if with_current(|sim| sim.fill(slice)) == Some(true) {
            return 0;
        }
    }
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let real = real_symbol(&REAL, c"getentropy");
    if real == 0 {
        set_errno(libc::ENOSYS);
        return -1;
    }
    type F = unsafe extern "C" fn(*mut c_void, libc::size_t) -> c_int;
    // SAFETY: `real` is glibc's getentropy, with this signature.
    unsafe { std::mem::transmute::<usize, F>(real)(buf, len) }
}

enum ClockKind {
    Monotonic,
    Realtime,
    Other,
}

fn clock_kind(clock: libc::clockid_t) -> ClockKind {
    match clock {
        libc::CLOCK_MONOTONIC | libc::CLOCK_MONOTONIC_RAW | libc::CLOCK_MONOTONIC_COARSE | libc::CLOCK_BOOTTIME => {
            ClockKind::Monotonic
        }
        libc::CLOCK_REALTIME | libc::CLOCK_REALTIME_COARSE | libc::CLOCK_TAI => ClockKind::Realtime,
        _ => ClockKind::Other,
    }
}

fn simulated_nanos(kind: &ClockKind) -> Option<u64> {
    with_current(|sim| {
        let base = match kind {
            ClockKind::Monotonic => sim.monotonic_base_nanos,
            ClockKind::Realtime => sim.realtime_base_nanos,
            ClockKind::Other => return None,
        };
        sim.clock_reads.set(sim.clock_reads.get() + 1);
        Some(base.saturating_add(sim.elapsed_nanos()))
    })
    .flatten()
}

fn real_clock_gettime(clock: libc::clockid_t, tp: *mut libc::timespec) -> c_int {
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let real = real_symbol(&REAL, c"clock_gettime");
    if real == 0 {
        // SAFETY: the raw system call with the caller's arguments.
        return unsafe { libc::syscall(libc::SYS_clock_gettime, clock, tp) } as c_int;
    }
    type F = unsafe extern "C" fn(libc::clockid_t, *mut libc::timespec) -> c_int;
    // SAFETY: `real` is glibc's clock_gettime, with this signature.
    unsafe { std::mem::transmute::<usize, F>(real)(clock, tp) }
}

/// `clock_gettime(2)`: monotonic and real-time clocks answered from the run's fake clock on a
/// simulation thread; CPU-time clocks and other threads pass through.
///
/// # Safety
/// `tp` must be valid for a write of one `timespec` (the libc contract).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn clock_gettime(clock: libc::clockid_t, tp: *mut libc::timespec) -> c_int {
    match simulated_nanos(&clock_kind(clock)) {
        Some(nanos) => {
            write_timespec(tp, nanos);
            0
        }
        None => real_clock_gettime(clock, tp),
    }
}

/// `gettimeofday(2)`: the simulated real-time clock on a simulation thread.
///
/// # Safety
/// `tv` must be null or valid for a write of one `timeval`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gettimeofday(tv: *mut libc::timeval, _tz: *mut c_void) -> c_int {
    let nanos = match simulated_nanos(&ClockKind::Realtime) {
        Some(nanos) => nanos,
        None => {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            if real_clock_gettime(libc::CLOCK_REALTIME, &mut ts) != 0 {
                return -1;
            }
            ts.tv_sec as u64 * NANOS_PER_SEC + ts.tv_nsec as u64
        }
    };
    if !tv.is_null() {
        // SAFETY: the caller passed a pointer to a timeval it owns.
        unsafe {
            (*tv).tv_sec = (nanos / NANOS_PER_SEC) as libc::time_t;
            (*tv).tv_usec = ((nanos % NANOS_PER_SEC) / 1_000) as libc::suseconds_t;
        }
    }
    0
}

/// `time(2)`: the simulated real-time clock, in whole seconds, on a simulation thread.
///
/// # Safety
/// `tloc` must be null or valid for a write of one `time_t`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn time(tloc: *mut libc::time_t) -> libc::time_t {
    let seconds = match simulated_nanos(&ClockKind::Realtime) {
        Some(nanos) => (nanos / NANOS_PER_SEC) as libc::time_t,
        None => {
            let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            if real_clock_gettime(libc::CLOCK_REALTIME, &mut ts) != 0 {
                return -1;
            }
            ts.tv_sec
        }
    };
    if !tloc.is_null() {
        // SAFETY: the caller passed a pointer to a time_t it owns.
        unsafe { *tloc = seconds };
    }
    seconds
}

/// `syscall(3)`: `SYS_getrandom` answered from the run's stream on a simulation thread (see the
/// module docs); everything else forwarded to glibc's `syscall`.
///
/// glibc's `syscall` is variadic and reads seven integer arguments (the number and six more) from
/// the argument registers and the stack whatever the caller passed; this definition reads the
/// same seven the same way, which is what the x86-64 and AArch64 calling conventions give a
/// non-variadic function for integer and pointer arguments, and forwards them all.
///
/// # Safety
/// The arguments must be valid for the system call `number` (the libc contract).
#[cfg(all(target_os = "linux", any(target_arch = "x86_64", target_arch = "aarch64")))]
#[unsafe(no_mangle)]
pub unsafe extern "C" fn syscall(
    number: c_long,
    a1: c_long,
    a2: c_long,
    a3: c_long,
    a4: c_long,
    a5: c_long,
    a6: c_long,
) -> c_long {
    if number == libc::SYS_getrandom {
        let (buf, len) = (a1 as *mut u8, a2 as usize);
        if len > 0 && !buf.is_null() {
            // SAFETY: per the getrandom(2) contract, buf is valid for len bytes of writes.
            let slice = unsafe { std::slice::from_raw_parts_mut(buf, len) };
            if with_current(|sim| sim.fill(slice)) == Some(true) {
                return len as c_long;
            }
        }
    }
    static REAL: AtomicUsize = AtomicUsize::new(0);
    let real = real_symbol(&REAL, c"syscall");
    type F = unsafe extern "C" fn(c_long, c_long, c_long, c_long, c_long, c_long, c_long) -> c_long;
    // SAFETY: `real` is glibc's syscall, called with the registers the caller gave us.
    unsafe { std::mem::transmute::<usize, F>(real)(number, a1, a2, a3, a4, a5, a6) }
}
