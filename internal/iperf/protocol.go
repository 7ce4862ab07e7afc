// Package iperf speaks iperf3's protocol (as of iperf 3.12) over TCP and UDP: a client that
// measures against a real iperf3 server, and a server a real iperf3 client can measure against,
// with reverse and bidirectional mode, parallel streams, omitted seconds, UDP's rate, jitter
// and loss, and iperf3's text and JSON output. It runs over any Network, so the same code
// measures the host's kernel sockets and nicstack's embedded user-space stack.
package iperf

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// Control-channel states, one signed byte each (iperf_api.h).
const (
	stateTestStart       = 1
	stateTestRunning     = 2
	stateTestEnd         = 4
	stateParamExchange   = 9
	stateCreateStreams   = 10
	stateServerTerminate = 11
	stateClientTerminate = 12
	stateExchangeResults = 13
	stateDisplayResults  = 14
	stateIperfDone       = 16
	stateAccessDenied    = -1
	stateServerError     = -2
)

// cookieSize is iperf3's COOKIE_SIZE: 36 characters and a NUL, sent first on every connection
// so the server can tell the test's data streams from other clients.
const cookieSize = 37

// maxControlJSON bounds a control message. Parameters and results are a few hundred bytes per
// stream; a server's output (--get-server-output) is a few hundred per interval and stream.
const maxControlJSON = 16 << 20

// iperf3's limits (iperf.h), which both ends check.
const (
	DefaultBlockSize    = 128 << 10 // -l for TCP
	defaultUDPBlockSize = 1460      // -l for UDP when the control connection's MSS is unknown
	defaultUDPRate      = 1 << 20   // -b for UDP: 1 Mbit/s (iperf3's UDP_RATE, 1024*1024)
	maxBlockSize        = 1 << 20   // MAX_BLOCKSIZE
	minUDPBlockSize     = 16        // MIN_UDP_BLOCKSIZE: the UDP header with 64-bit counters
	maxUDPBlockSize     = 65535 - 8 - 20
	maxBuffer           = 512 << 20 // MAX_TCP_BUFFER, the largest -w
	maxMSS              = 9 * 1024
	maxStreams          = 128
	maxTime             = 86400
	MaxOmit             = 60 // seconds of -O
	maxBurst            = 1000
	defaultPacingTimer  = 1000 // µs between checks of a rate-limited stream (--pacing-timer)
	// --rcv-timeout in ms: DEFAULT_NO_MSG_RCVD_TIMEOUT and MIN_NO_MSG_RCVD_TIMEOUT; the most
	// for it and --snd-timeout is maxTime's.
	defaultRcvTimeout = 120000
	minRcvTimeout     = 100
)

// Version is what we announce as client_version and in results.
const Version = "3.12"

type cookie [cookieSize]byte

func newCookie() (cookie, error) {
	const chars = "abcdefghijklmnopqrstuvwxyz234567" // iperf3's alphabet: 32 symbols
	var c cookie
	if _, err := rand.Read(c[:cookieSize-1]); err != nil {
		return c, err
	}
	for i := 0; i < cookieSize-1; i++ {
		c[i] = chars[c[i]%32]
	}
	c[cookieSize-1] = 0
	return c, nil
}

func (c cookie) String() string { return string(c[:cookieSize-1]) }

func writeState(w io.Writer, s int8) error {
	_, err := w.Write([]byte{byte(s)})
	return err
}

func readState(r io.Reader) (int8, error) {
	var b [1]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return 0, err
	}
	return int8(b[0]), nil
}

// writeServerError tells the client why the test failed as iperf3 does: SERVER_ERROR, then
// i_errno and errno as 32-bit big-endian integers.
func writeServerError(w io.Writer, e *Error) error {
	msg := make([]byte, 9)
	state := int8(stateServerError)
	msg[0] = byte(state)
	binary.BigEndian.PutUint32(msg[1:], uint32(e.Code))
	binary.BigEndian.PutUint32(msg[5:], uint32(e.Errno))
	_, err := w.Write(msg)
	return err
}

// readServerError reads the two integers that follow SERVER_ERROR.
func readServerError(r io.Reader) error {
	var b [8]byte
	if _, err := io.ReadFull(r, b[:]); err != nil {
		return fail(108, err) // IECTRLREAD
	}
	return &Error{Code: Code(int32(binary.BigEndian.Uint32(b[:4]))), Errno: errnoOf(int32(binary.BigEndian.Uint32(b[4:])))}
}

// writeJSON sends v as iperf3 does: a 4-byte big-endian length, then the JSON text.
func writeJSON(w io.Writer, v any) error {
	body, err := json.Marshal(v)
	if err != nil {
		return err
	}
	msg := make([]byte, 4+len(body))
	binary.BigEndian.PutUint32(msg, uint32(len(body)))
	copy(msg[4:], body)
	_, err = w.Write(msg)
	return err
}

func readJSON(r io.Reader, v any) error {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxControlJSON {
		return fmt.Errorf("control message of %d bytes is too large", n)
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	return json.Unmarshal(body, v)
}

// params is the PARAM_EXCHANGE message (send_parameters in iperf_api.c), with the keys iperf3
// 3.12 sends. Fields iperf3 sends only when set are omitempty; unknown keys are ignored, and
// the ones we take but do not act on (fqrate, flowlabel, title, extra_data, dont_fragment)
// change only what iperf3 would change on another host.
type params struct {
	TCP             bool   `json:"tcp,omitempty"`
	UDP             bool   `json:"udp,omitempty"`
	SCTP            bool   `json:"sctp,omitempty"`
	Omit            int    `json:"omit"`
	Time            int    `json:"time"`
	Num             uint64 `json:"num"`
	BlockCount      uint64 `json:"blockcount"`
	MSS             int    `json:"MSS,omitempty"`
	NoDelay         bool   `json:"nodelay,omitempty"`
	Parallel        int    `json:"parallel"`
	Reverse         bool   `json:"reverse,omitempty"`
	Bidirectional   bool   `json:"bidirectional,omitempty"`
	Window          int    `json:"window,omitempty"`
	Len             int    `json:"len,omitempty"`
	Bandwidth       uint64 `json:"bandwidth,omitempty"`
	FQRate          uint64 `json:"fqrate,omitempty"`
	PacingTimer     int    `json:"pacing_timer,omitempty"`
	Burst           int    `json:"burst,omitempty"`
	TOS             int    `json:"TOS,omitempty"`
	Title           string `json:"title,omitempty"`
	ExtraData       string `json:"extra_data,omitempty"`
	Congestion      string `json:"congestion,omitempty"`
	CongestionUsed  string `json:"congestion_used,omitempty"`
	GetServerOutput int    `json:"get_server_output,omitempty"`
	UDPCounters64   int    `json:"udp_counters_64bit,omitempty"`
	RepeatingData   int    `json:"repeating_payload,omitempty"`
	ZeroCopy        int    `json:"zerocopy,omitempty"`
	DontFragment    int    `json:"dont_fragment,omitempty"`
	ClientVersion   string `json:"client_version,omitempty"`
}

// results is the EXCHANGE_RESULTS message each side sends (send_results). Numbers are float64
// because iperf3 writes every number as a double.
type results struct {
	CPUUtilTotal         float64         `json:"cpu_util_total"`
	CPUUtilUser          float64         `json:"cpu_util_user"`
	CPUUtilSystem        float64         `json:"cpu_util_system"`
	SenderHasRetransmits float64         `json:"sender_has_retransmits"`
	CongestionUsed       string          `json:"congestion_used,omitempty"`
	ServerOutputJSON     json.RawMessage `json:"server_output_json,omitempty"`
	ServerOutputText     *string         `json:"server_output_text,omitempty"`
	Streams              []streamResult  `json:"streams"`
}

type streamResult struct {
	ID          float64 `json:"id"`
	Bytes       float64 `json:"bytes"`
	Retransmits float64 `json:"retransmits"`
	Jitter      float64 `json:"jitter"`
	Errors      float64 `json:"errors"`
	Packets     float64 `json:"packets"`
	StartTime   float64 `json:"start_time"`
	EndTime     float64 `json:"end_time"`
}

// streamID numbers streams the way iperf_add_stream does: 1, then 3, 4, 5, ... Both ends number
// in connection order and match results by id, so we must skip 2 as well.
func streamID(i int) int {
	if i == 0 {
		return 1
	}
	return i + 2
}
