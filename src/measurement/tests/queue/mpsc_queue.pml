/* Exhaustive model of the MPSC queue (src/measurement/runtime/gpu/mpsc_queue.hpp,
 * seed 000 §4.3) for 2 producers and 1 consumer, each producer enqueueing 2 elements.
 * Every step of the C++ code that touches shared state is one atomic step here (SPIN
 * explores all interleavings of them under sequential consistency; the C++ uses
 * acquire/release on the same locations).
 *
 * Checked (safety run): every element is delivered exactly once; each producer's elements
 * arrive in its order; dequeue returns "nothing" only when the queue is empty or an
 * enqueue is in flight; when everything has been delivered the queue is back in its empty
 * state. Checked (liveness run, -DNP with weak fairness): no execution where the consumer
 * keeps draining forever without delivering, i.e. every element is eventually delivered.
 * Built with -DMUTANT the model drops the consumer's compare-and-swap on the head, and
 * the checker must find the lost element (the test suite runs both). */

#define NIL 0
#define N 4                 /* elements 1..4: producer A owns 1,2; producer B owns 3,4 */

byte head = NIL;
byte tail = NIL;
byte next[N + 1];
bool delivered[N + 1];
byte ndelivered = 0;
byte inflight = 0;          /* enqueues between their exchange and their link */
byte linked = 0;            /* enqueues completed */

inline enqueue(e) {
  next[e] = NIL;
  atomic { prev = tail; tail = e; inflight++ }       /* atomic exchange on the tail */
  if
  :: prev == NIL -> atomic { head = e; inflight--; linked++ }
  :: else -> atomic { next[prev] = e; inflight--; linked++ }
  fi;
  prev = NIL
}

proctype producer(byte first; byte second) {
  byte prev = NIL;
  enqueue(first);
progressA:
  enqueue(second)
}

inline deliver(e) {
  atomic {
    assert(!delivered[e]);
    /* per-producer order: an element's predecessor from the same producer came first */
    assert(e == 1 || e == 3 || delivered[e - 1]);
    delivered[e] = true;
    ndelivered++
  }
}

proctype consumer() {
  byte first, succ;
  bool took;
  do
  :: ndelivered == N -> break
  :: else ->
     atomic {
       first = head;
       /* an empty head: everything enqueued so far was delivered, or an enqueue into the
          empty queue is in flight (checked at the instant of the read) */
       assert(first != NIL || inflight > 0 || linked == ndelivered)
     };
     if
     :: first == NIL -> skip
     :: else ->
        succ = next[first];
        if
        :: succ != NIL -> head = succ;
progressD1: deliver(first)
        :: else ->
           atomic {
             if
             :: tail == first -> tail = NIL; took = true
             :: else ->
                took = false;
                /* the tail moved past first: its successor is being linked right now
                   (or has just been linked since succ was read) */
                assert(inflight > 0 || next[first] != NIL)
             fi
           };
           if
           :: took ->
#ifdef MUTANT
              head = NIL;   /* the bug the head CAS prevents: losing a racing enqueue */
#else
              atomic { if :: head == first -> head = NIL :: else -> skip fi };
#endif
progressD2:   deliver(first)
           :: else -> skip        /* return empty instead of waiting */
           fi
        fi
     fi
  od;
  assert(head == NIL && tail == NIL && inflight == 0)
}

init {
  atomic {
    run producer(1, 2);
    run producer(3, 4);
    run consumer()
  }
}
