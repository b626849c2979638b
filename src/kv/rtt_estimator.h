// RttEstimator: how long a worker waits for one server's answer before it
// sends a request part again, learned from the round trips of earlier parts,
// as TCP's retransmission timer does (RFC 6298).
//
// Each answered part that was sent once gives a sample R of the round trip.
// The first sets SRTT = R and RTTVAR = R / 2; each later one
//   RTTVAR = 3/4 RTTVAR + 1/4 |SRTT - R|,   SRTT = 7/8 SRTT + 1/8 R,
// and the timeout is RTO = SRTT + max(G, 4 RTTVAR), G the clock's granularity.
// Before any sample the timeout is the first estimate the worker was given.
//
// Karn's rule: a part sent more than once gives no sample (its answer may be
// to any of its copies), unless the answer says which copy it answers and
// that is the first (the KVWorker passes it as sent once). So that the estimate can still grow when
// the round trip does, a part's timeout backs off the estimate for the parts sent after it (as
// TCP's timer stays backed off), until a sample resets it.
//
// Every timeout lies in [min_s, max_s]. Not synchronized: the KVWorker uses
// one per server under its lock.
#ifndef KEEL_KV_RTT_ESTIMATOR_H_
#define KEEL_KV_RTT_ESTIMATOR_H_

namespace keel {

class RttEstimator {
 public:
  // RFC 6298's G: below this a variance term does not count (the monotonic
  // clock ticks in nanoseconds; the worker's resend thread wakes within about
  // this of a deadline).
  static constexpr double kGranularitySeconds = 1e-4;

  // `first_s`: the timeout before any sample. Requires 0 < min_s <= max_s.
  RttEstimator(double first_s, double min_s, double max_s);

  // A part was answered `round_trip_s` after its first send, having been sent
  // `sends` times in all (1 also for the first copy's answer known as such).
  // Only sends == 1 is a sample; it also ends any backoff.
  void OnAnswer(double round_trip_s, int sends);
  // A part had no answer within its timeout after its `sends`-th send: parts
  // sent from now on wait at least as long as its next wait, until a sample.
  void OnTimeout(int sends);

  // How long to wait for an answer after a part's `sends`-th send (1-based):
  // RTO doubled per earlier send of the part (or backed off, whichever is
  // longer), within [min_s, max_s].
  double Timeout(int sends = 1) const;

  bool has_sample() const { return has_sample_; }
  double smoothed_s() const { return smoothed_s_; }
  double variance_s() const { return variance_s_; }

 private:
  double first_s_;
  double min_s_;
  double max_s_;
  bool has_sample_ = false;
  double smoothed_s_ = 0;  // SRTT
  double variance_s_ = 0;  // RTTVAR
  int backoff_sends_ = 1;  // new parts wait as if on their backoff_sends_-th send
};

}  // namespace keel

#endif  // KEEL_KV_RTT_ESTIMATOR_H_
