package guest

import (
	"fmt"
	"strings"
	"time"

	"github.com/nicstack/nicstack/internal/iperf"
)

// ClientRetry bounds how long a guest's iperf client tries to reach its server, a try every
// RetryEvery: the server may start later (another component, or the iperf3 -s a far
// namespace's exec starts), or still run the test of a client that vanished (until its
// --snd-timeout or --rcv-timeout).
const (
	ClientRetry = 60 * time.Second
	RetryEvery  = 500 * time.Millisecond
)

// realIperf3 is the shell command a netns guest runs for its iperf in its namespace: the real
// iperf3, whose client is tried again as an embedded guest's is while it cannot connect or the
// server is busy. iperf3 itself gives up at once, and the namespaces' commands start in no
// order: a SYN that reaches the far namespace before its iperf3 -s listens is refused. A
// try's output is held until it is known to be no such failure, so the log has the last
// try's words only (and the guest's "not reachable or busy yet" between tries); -J puts the
// error in its JSON and exits 0, which the match on the output covers too.
func realIperf3(cmd *iperf.Command, args string) string {
	if cmd.Server {
		return "iperf3 " + args
	}
	connect := (&iperf.Error{Code: iperf.CodeConnect}).Error()
	busy := iperf.ErrAccessDenied.Error()
	return strings.NewReplacer(
		"ARGS", args, "CONNECT", connect, "BUSY", busy,
		"BOUND", fmt.Sprint(int(ClientRetry.Seconds())), "PAUSE", fmt.Sprint(RetryEvery.Seconds()),
	).Replace(`end=$(($(date +%s)+BOUND)); ` +
		`while out=$(iperf3 ARGS 2>&1); rc=$?; ` +
		`case $out in *'CONNECT'*|*'BUSY'*) [ "$(date +%s)" -lt "$end" ];; *) false;; esac; do ` +
		`echo "iperf3 server not reachable or busy yet: $(printf %s "$out" | grep -o -m1 -e 'CONNECT[^"]*' -e 'BUSY')"; ` +
		`sleep PAUSE; done; printf '%s\n' "$out"; exit $rc`)
}
