//! The C ABI (header `include/hsched_coop.h`). Times are nanoseconds of the
//! loop's monotonic clock (`hsched_coop_now`). Event ids are positive; 0
//! means "no event". Functions return 1 when they acted, 0 when they had no
//! effect (idempotence), -1 on a bad argument; none panics across the
//! boundary.
//!
//! A callback receives the loop pointer and may call `submit`, `cancel`,
//! `event` and `stop` on it: while a callback runs those calls go through
//! the dispatcher's [`Handle`], recorded in a thread-local for the
//! callback's extent, so the loop is never borrowed twice.
#![allow(unsafe_code)]

use crate::event_loop::{
    BestEffortKey, Clock, CoopPoll, EventId, EventLoop, Handle, PollIn, PollOut, SystemClock, When,
};
use std::cell::Cell;
use std::ffi::c_void;

/// An event callback: `(loop, event id, user data)`.
pub type HschedCoopCb = extern "C" fn(*mut HschedCoopLoop, u64, *mut c_void);

/// IN or OUT of `coop_poll` as C sees it.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct HschedCoopPollParam {
    /// 1 when `deadline` is meaningful.
    pub has_deadline: u8,
    /// Release time of the earliest deadline event (IN) or the time by
    /// which to yield again (OUT).
    pub deadline: u64,
    /// 1 when `priority`/`timestamp` are meaningful.
    pub has_best_effort: u8,
    /// Best-effort priority, larger is more important.
    pub priority: i64,
    /// Best-effort timestamp, earlier first.
    pub timestamp: u64,
}

/// The scheduler side supplied by C: reads IN, fills OUT, returns when the
/// caller should run again.
pub type HschedCoopPollFn =
    extern "C" fn(*const HschedCoopPollParam, *mut HschedCoopPollParam, *mut c_void);

/// An event loop owned by C.
pub struct HschedCoopLoop {
    inner: EventLoop<SystemClock>,
}

thread_local! {
    /// The dispatcher handle while a C callback runs on this thread, with
    /// the loop it belongs to.
    static CURRENT: Cell<(*mut c_void, *const HschedCoopLoop)> =
        const { Cell::new((std::ptr::null_mut(), std::ptr::null())) };
}

struct CPoller {
    f: HschedCoopPollFn,
    data: usize,
}

impl CoopPoll for CPoller {
    fn coop_poll(&mut self, _clock: &mut dyn Clock, input: &PollIn) -> PollOut {
        let inp = HschedCoopPollParam {
            has_deadline: u8::from(input.deadline.is_some()),
            deadline: input.deadline.unwrap_or(0),
            has_best_effort: u8::from(input.best_effort.is_some()),
            priority: input.best_effort.map_or(0, |b| b.priority),
            timestamp: input.best_effort.map_or(0, |b| b.timestamp),
        };
        let mut out = HschedCoopPollParam::default();
        (self.f)(&inp, &mut out, self.data as *mut c_void);
        PollOut {
            deadline: (out.has_deadline != 0).then_some(out.deadline),
            best_effort: (out.has_best_effort != 0).then_some(BestEffortKey {
                priority: out.priority,
                timestamp: out.timestamp,
            }),
        }
    }
}

/// Runs `f` on the handle of the callback running for `l`, if any, or on
/// the loop itself.
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
unsafe fn with_loop<R>(
    l: *mut HschedCoopLoop,
    on_handle: impl FnOnce(&mut Handle<'_>) -> R,
    on_loop: impl FnOnce(&mut EventLoop<SystemClock>) -> R,
    bad: R,
) -> R {
    if l.is_null() {
        return bad;
    }
    let (h, owner) = CURRENT.with(Cell::get);
    if !h.is_null() && std::ptr::eq(owner, l) {
        // SAFETY: `h` was stored by `c_handler` from a live `&mut Handle`
        // and is cleared before that borrow ends; the callback runs inside
        // it on this thread, and nothing else uses the handle meanwhile.
        let h = unsafe { &mut *(h as *mut Handle<'static>) };
        on_handle(h)
    } else {
        // SAFETY: `l` came from `hsched_coop_new*` and was not freed (the
        // caller's contract); no callback of this loop is running on this
        // thread, so `run` does not hold a borrow of it.
        let l = unsafe { &mut *l };
        on_loop(&mut l.inner)
    }
}

fn c_handler(
    owner: *mut HschedCoopLoop,
    cb: HschedCoopCb,
    data: usize,
) -> impl FnMut(&mut Handle<'_>) + Send + 'static {
    let owner = owner as usize;
    move |h: &mut Handle<'_>| {
        let id = h.me().0 as u64;
        let prev = CURRENT.with(|c| {
            c.replace((
                h as *mut Handle<'_> as *mut c_void,
                owner as *const HschedCoopLoop,
            ))
        });
        cb(owner as *mut HschedCoopLoop, id, data as *mut c_void);
        CURRENT.with(|c| c.set(prev));
    }
}

/// A new non-cooperative loop on the process's monotonic clock. Free it
/// with `hsched_coop_free`.
#[no_mangle]
pub extern "C" fn hsched_coop_new() -> *mut HschedCoopLoop {
    Box::into_raw(Box::new(HschedCoopLoop {
        inner: EventLoop::new(SystemClock::default()),
    }))
}

/// A new cooperative loop that yields through `poll` (with `data`).
#[no_mangle]
pub extern "C" fn hsched_coop_new_cooperative(
    poll: HschedCoopPollFn,
    data: *mut c_void,
) -> *mut HschedCoopLoop {
    let poller = CPoller {
        f: poll,
        data: data as usize,
    };
    Box::into_raw(Box::new(HschedCoopLoop {
        inner: EventLoop::cooperative(SystemClock::default(), Box::new(poller)),
    }))
}

/// Frees a loop (null is ignored).
///
/// # Safety
/// `l` is null or a loop from `hsched_coop_new*` not yet freed, and no
/// callback of it is running.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_free(l: *mut HschedCoopLoop) {
    if !l.is_null() {
        // SAFETY: `l` came from `Box::into_raw` in `hsched_coop_new*` and is
        // freed once (this function's contract).
        drop(unsafe { Box::from_raw(l) });
    }
}

/// Creates an event calling `cb(loop, id, data)`; returns its id, 0 on a
/// null loop.
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_event(
    l: *mut HschedCoopLoop,
    cb: HschedCoopCb,
    data: *mut c_void,
) -> u64 {
    let data = data as usize;
    // SAFETY: forwarded contract: `l` is null or live.
    unsafe {
        with_loop(
            l,
            |h| h.event(c_handler(l, cb, data)).0 as u64,
            |lp| lp.event(c_handler(l, cb, data)).0 as u64,
            0,
        )
    }
}

/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
unsafe fn submit(l: *mut HschedCoopLoop, ev: u64, when: When) -> i32 {
    let Ok(id) = usize::try_from(ev) else {
        return -1;
    };
    // SAFETY: forwarded contract: `l` is null or live.
    unsafe {
        with_loop(
            l,
            |h| i32::from(h.submit(EventId(id), when)),
            |lp| i32::from(lp.submit(EventId(id), when)),
            -1,
        )
    }
}

/// Submits `ev` as a deadline event released at `at_ns`.
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_submit_deadline(
    l: *mut HschedCoopLoop,
    ev: u64,
    at_ns: u64,
) -> i32 {
    // SAFETY: forwarded contract: `l` is null or live.
    unsafe { submit(l, ev, When::Deadline(at_ns)) }
}

/// Submits `ev` as a best-effort event.
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_submit_best_effort(
    l: *mut HschedCoopLoop,
    ev: u64,
    priority: i64,
    timestamp: u64,
) -> i32 {
    let when = When::BestEffort(BestEffortKey {
        priority,
        timestamp,
    });
    // SAFETY: forwarded contract: `l` is null or live.
    unsafe { submit(l, ev, when) }
}

/// Cancels `ev` (idempotent).
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_cancel(l: *mut HschedCoopLoop, ev: u64) -> i32 {
    let Ok(id) = usize::try_from(ev) else {
        return -1;
    };
    // SAFETY: forwarded contract: `l` is null or live.
    unsafe {
        with_loop(
            l,
            |h| i32::from(h.cancel(EventId(id))),
            |lp| i32::from(lp.cancel(EventId(id))),
            -1,
        )
    }
}

/// Stops the loop after the current event.
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_stop(l: *mut HschedCoopLoop) {
    // SAFETY: forwarded contract: `l` is null or live.
    unsafe { with_loop(l, |h| h.stop(), |lp| lp.stop(), ()) }
}

/// Runs the loop; returns the number of events dispatched (saturated), -1
/// on a null loop or when called from a callback.
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_run(l: *mut HschedCoopLoop) -> i64 {
    let (h, _) = CURRENT.with(Cell::get);
    if l.is_null() || !h.is_null() {
        return -1;
    }
    // SAFETY: `l` is live (this function's contract) and no callback is
    // running on this thread, so nothing else borrows it.
    let l = unsafe { &mut *l };
    i64::try_from(l.inner.run().dispatched).unwrap_or(i64::MAX)
}

/// The loop clock's current time in nanoseconds (0 on a null loop).
///
/// # Safety
/// `l` is null or a live loop from `hsched_coop_new*`.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_now(l: *mut HschedCoopLoop) -> u64 {
    // SAFETY: forwarded contract: `l` is null or live.
    unsafe { with_loop(l, |h| h.now(), |lp| lp.clock().now_ns(), 0) }
}

/// A loop that is cooperative through the live channel of `hsched run`
/// (`HSCHED_COOP`, see [`crate::live`]) when one is usable, and
/// non-cooperative otherwise (said once on stderr). Free it with
/// `hsched_coop_free`.
#[no_mangle]
pub extern "C" fn hsched_coop_new_live() -> *mut HschedCoopLoop {
    let (inner, _) = crate::live::event_loop_from_env(SystemClock::default());
    Box::into_raw(Box::new(HschedCoopLoop { inner }))
}

/// The live `coop_poll` of one thread, for C programs with an event loop
/// of their own.
pub struct HschedCoopLive {
    inner: crate::live::LivePoll,
}

/// Opens the live channel named by `HSCHED_COOP` for the calling thread;
/// null when there is none or it is unusable (the reason is said once on
/// stderr): the program should then run non-cooperatively.
#[no_mangle]
pub extern "C" fn hsched_coop_live_open() -> *mut HschedCoopLive {
    match crate::live::LivePoll::from_env() {
        Ok(inner) => Box::into_raw(Box::new(HschedCoopLive { inner })),
        Err(e) => {
            crate::live::note_fallback(&e);
            std::ptr::null_mut()
        }
    }
}

/// One live `coop_poll`. Times are `CLOCK_MONOTONIC` nanoseconds
/// (`hsched_coop_mono_now`). Returns 0 with `out` filled when the caller
/// is to run again, -1 on a null argument or when the daemon refused the
/// call or is gone (then stop cooperating).
///
/// # Safety
/// `h` is null or from `hsched_coop_live_open` and not closed; `input` and
/// `out` are null or valid.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_live_poll(
    h: *mut HschedCoopLive,
    input: *const HschedCoopPollParam,
    out: *mut HschedCoopPollParam,
) -> i32 {
    if h.is_null() || input.is_null() || out.is_null() {
        return -1;
    }
    // SAFETY: non-null and valid by this function's contract; C passes
    // them for the call's duration only.
    let (h, inp) = unsafe { (&mut *h, &*input) };
    let p = crate::live::MonoParam {
        deadline: (inp.has_deadline != 0).then_some(inp.deadline),
        best_effort: (inp.has_best_effort != 0).then_some(BestEffortKey {
            priority: inp.priority,
            timestamp: inp.timestamp,
        }),
    };
    match h.inner.poll_mono(&p) {
        Ok(o) => {
            let r = HschedCoopPollParam {
                has_deadline: u8::from(o.deadline.is_some()),
                deadline: o.deadline.unwrap_or(0),
                has_best_effort: u8::from(o.best_effort.is_some()),
                priority: o.best_effort.map_or(0, |b| b.priority),
                timestamp: o.best_effort.map_or(0, |b| b.timestamp),
            };
            // SAFETY: `out` is non-null and valid (contract).
            unsafe { *out = r };
            0
        }
        Err(e) => {
            crate::live::note_fallback(&e);
            -1
        }
    }
}

/// Times the scheduler policed this thread (0 on null).
///
/// # Safety
/// `h` is null or from `hsched_coop_live_open` and not closed.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_live_policed(h: *const HschedCoopLive) -> u64 {
    if h.is_null() {
        return 0;
    }
    // SAFETY: non-null and live (contract).
    unsafe { &*h }.inner.monitor().policed()
}

/// Closes the channel of `h` (null is ignored), freeing its slot.
///
/// # Safety
/// `h` is null or from `hsched_coop_live_open`, closed once, on the thread
/// that opened it.
#[no_mangle]
pub unsafe extern "C" fn hsched_coop_live_close(h: *mut HschedCoopLive) {
    if !h.is_null() {
        // SAFETY: from `Box::into_raw` in `hsched_coop_live_open`, freed
        // once (contract).
        drop(unsafe { Box::from_raw(h) });
    }
}

/// `CLOCK_MONOTONIC` now, nanoseconds (the live channel's clock).
#[no_mangle]
pub extern "C" fn hsched_coop_mono_now() -> u64 {
    crate::live::mono_now()
}
