//! rr.rs: round robin on one processor, the plug-in of
//! `sdk/tutorial/rr.c` (docs/writing-a-policy.md) in Rust: the same
//! descriptor, parameters and decisions.
//!
//! Ready children wait in one first-in, first-out queue. The child at its
//! head runs for at most `quantum`; when its quantum ends and another child
//! is waiting, it goes to the back of the queue and the next one runs. A
//! child that blocks leaves the queue; when it wakes it joins the back.
//! When the parent takes the processor away, the child that was running
//! goes back to the front: it lost its turn through no fault of its own.
//!
//! Everything the plug-in knows lives in `Rr`, which `export_policy!`
//! keeps in a static: hsched gives every scheduler instance its own copy
//! of the module.
//!
//! ```sh
//! cargo build --release --target wasm32-unknown-unknown --example rr
//! # target/wasm32-unknown-unknown/release/examples/rr.wasm
//! ```

// A plug-in has no standard library; on the host, where hsched's CI only
// type-checks it, the example links std like any other program.
#![cfg_attr(target_arch = "wasm32", no_std)]

use hsched_guest::{self as hs, Cpu, Duration, Policy, Refusal, RevokeReason, Time, Vp};

const DESCRIPTOR: &core::ffi::CStr = c"{\"abi\":1,\"name\":\"rr\",\
\"summary\":\"round robin with a fixed quantum, one processor\",\
\"instance_params\":[{\"key\":\"quantum\",\"kind\":\"duration\",\
\"default\":\"10ms\",\"doc\":\"longest run before the next child's turn\"}],\
\"multiprocessor\":false,\
\"guarantee\":{\"needs\":\"any\",\"gives\":\"NULL\"}}";

const MAX_KIDS: usize = 256;
const NO_KID: u32 = 0xFFFF_FFFF;

#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    Free,
    Waiting,
    Queued,
    Running,
}

#[derive(Clone, Copy)]
struct Kid {
    vp: Vp,
    state: State,
    /// The next child in the queue, or in the free list.
    next: u32,
}

struct Rr {
    kids: [Kid; MAX_KIDS],
    /// Slots ever used.
    used: u32,
    free_list: u32,
    head: u32,
    tail: u32,
    /// The child we gave the processor to.
    cur: u32,
    cur_cpu: Cpu,
    slice_end: Time,
    quantum: Duration,
}

impl Rr {
    const fn new() -> Rr {
        Rr {
            kids: [Kid {
                vp: 0,
                state: State::Free,
                next: 0,
            }; MAX_KIDS],
            used: 0,
            free_list: NO_KID,
            head: NO_KID,
            tail: NO_KID,
            cur: NO_KID,
            cur_cpu: 0,
            slice_end: 0,
            quantum: 10_000_000, // 10 ms
        }
    }

    fn kid(&mut self, s: u32) -> &mut Kid {
        &mut self.kids[s as usize]
    }

    /// The child table slot of a VP: we stored it as the VP's tag.
    fn slot(&self, vp: Vp) -> u32 {
        match hs::child_tag(vp) {
            Some(s) if s < self.used && self.kids[s as usize].vp == vp => s,
            // A bug in this file: the panic traps and hsched unloads the
            // plug-in.
            _ => panic!("rr: a VP without its slot"),
        }
    }

    fn push_back(&mut self, s: u32) {
        self.kid(s).state = State::Queued;
        self.kid(s).next = NO_KID;
        if self.tail == NO_KID {
            self.head = s;
        } else {
            let t = self.tail;
            self.kid(t).next = s;
        }
        self.tail = s;
    }

    fn push_front(&mut self, s: u32) {
        let h = self.head;
        self.kid(s).state = State::Queued;
        self.kid(s).next = h;
        self.head = s;
        if self.tail == NO_KID {
            self.tail = s;
        }
    }

    fn pop_front(&mut self) -> u32 {
        let s = self.head;
        self.head = self.kid(s).next;
        if self.head == NO_KID {
            self.tail = NO_KID;
        }
        s
    }

    fn unlink(&mut self, s: u32) {
        let mut prev = NO_KID;
        let mut i = self.head;
        while i != NO_KID {
            let next = self.kid(i).next;
            if i == s {
                if prev == NO_KID {
                    self.head = next;
                } else {
                    self.kid(prev).next = next;
                }
                if self.tail == s {
                    self.tail = prev;
                }
                return;
            }
            prev = i;
            i = next;
        }
    }

    /// Takes the processor back from the running child, which joins the
    /// queue at the front or the back. hsched's view may lag behind ours (a
    /// grant we queued can be dropped when the processor goes away first),
    /// so revoke only if the child really runs there.
    fn take_back(&mut self, to_front: bool, reason: RevokeReason) {
        let s = self.cur;
        self.cur = NO_KID;
        if to_front {
            self.push_front(s);
        } else {
            self.push_back(s);
        }
        let vp = self.kid(s).vp;
        if hs::vp_cpu(vp) == Some(self.cur_cpu) {
            hs::revoke(vp, reason);
        }
    }

    /// Every hook ends here: end an expired quantum, give a free processor
    /// to the head of the queue or give it back, ask for a processor when
    /// someone waits, and arm the timer for the end of the quantum.
    fn decide(&mut self) {
        let now = hs::now();
        // The processor we hold now. rr.c asks for hsched_vp_cpu of parent
        // VP 0 outright; a uniprocessor instance always has that one VP
        // once hooks run, so asking only when it is there changes nothing.
        let parent = hs::parent_vp(0);
        let cpu = parent.and_then(hs::vp_cpu);
        if self.cur != NO_KID && cpu == Some(self.cur_cpu) && now >= self.slice_end {
            if self.head != NO_KID {
                self.take_back(false, RevokeReason::Preempted);
            } else {
                self.slice_end = now + self.quantum; // alone: another quantum
            }
        }
        if self.cur == NO_KID {
            if let (Some(parent), Some(cpu)) = (parent, cpu) {
                if self.head != NO_KID {
                    let c = self.pop_front();
                    self.cur = c;
                    self.cur_cpu = cpu;
                    self.kid(c).state = State::Running;
                    self.slice_end = now + self.quantum;
                    hs::grant(self.kid(c).vp, cpu);
                } else {
                    hs::release(parent);
                }
            }
        }
        hs::set_parent_demand(u32::from(self.cur != NO_KID || self.head != NO_KID));
        if self.cur != NO_KID {
            hs::set_timer(self.slice_end);
        } else {
            hs::cancel_timer();
        }
    }
}

impl Policy for Rr {
    fn create(&mut self) -> Result<(), Refusal> {
        let valid = match hs::param::<hs::Dur>("quantum") {
            hs::ParamRead::Ok(hs::Dur(q)) => {
                self.quantum = q;
                q != 0
            }
            hs::ParamRead::Absent => true, // the default, 10 ms
            hs::ParamRead::Wrong => false,
        };
        if !valid {
            return Err(hs::refuse(
                Refusal::Param,
                "quantum must be a positive duration",
            ));
        }
        Ok(())
    }

    fn register_vp(&mut self, vp: Vp) -> Result<(), Refusal> {
        let s = if self.free_list != NO_KID {
            let s = self.free_list;
            self.free_list = self.kid(s).next;
            s
        } else if (self.used as usize) < MAX_KIDS {
            self.used += 1;
            self.used - 1
        } else {
            return Err(hs::refuse(
                Refusal::Refused,
                "rr takes at most 256 children",
            ));
        };
        self.kid(s).vp = vp;
        self.kid(s).state = State::Waiting;
        hs::set_child_tag(vp, s);
        Ok(())
    }

    fn unregister_vp(&mut self, vp: Vp) {
        let s = self.slot(vp);
        if self.kid(s).state == State::Queued {
            self.unlink(s);
        }
        if self.cur == s {
            self.cur = NO_KID;
        }
        let free = self.free_list;
        let k = self.kid(s);
        k.state = State::Free;
        k.vp = hs::NONE;
        k.next = free;
        self.free_list = s;
        self.decide();
    }

    fn request(&mut self, vp: Vp) {
        let s = self.slot(vp);
        if self.kid(s).state == State::Waiting {
            self.push_back(s);
        }
        self.decide();
    }

    fn release(&mut self, vp: Vp) {
        let s = self.slot(vp);
        if self.cur == s {
            self.cur = NO_KID; // its processor is free again
        } else if self.kid(s).state == State::Queued {
            self.unlink(s);
        }
        self.kid(s).state = State::Waiting;
        self.decide();
    }

    fn grant(&mut self, _parent: Vp, _cpu: Cpu) {
        self.decide();
    }

    fn revoke(&mut self, parent: Vp, reason: RevokeReason) {
        if self.cur != NO_KID && hs::vp_last_cpu(parent) == Some(self.cur_cpu) {
            self.take_back(true, reason);
        }
        self.decide();
    }

    fn timer(&mut self) {
        self.decide();
    }
}

hsched_guest::export_policy! {
    policy: Rr = Rr::new(),
    descriptor: DESCRIPTOR,
    optional: [create, timer],
}
