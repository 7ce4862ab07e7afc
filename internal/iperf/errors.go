package iperf

import (
	"errors"
	"fmt"
	"syscall"
)

// Code is one of iperf3's error numbers (i_errno, iperf_api.h). A server that fails a test sends
// its code and the system's errno to the client (SERVER_ERROR), which prints iperf3's message
// for them, so both ends of a test name the same reason.
type Code int32

// The codes this package sends or meets; a peer may send any other, which Error still names.
const (
	CodeServerClient  Code = 1   // IESERVCLIENT
	CodeNoRole        Code = 2   // IENOROLE
	CodeServerOnly    Code = 3   // IESERVERONLY
	CodeClientOnly    Code = 4   // IECLIENTONLY
	CodeDuration      Code = 5   // IEDURATION
	CodeNumStreams    Code = 6   // IENUMSTREAMS
	CodeBlockSize     Code = 7   // IEBLOCKSIZE
	CodeBufSize       Code = 8   // IEBUFSIZE
	CodeInterval      Code = 9   // IEINTERVAL
	CodeMSS           Code = 10  // IEMSS
	CodeNoSendfile    Code = 11  // IENOSENDFILE
	CodeOmit          Code = 12  // IEOMIT
	CodeUnimplemented Code = 13  // IEUNIMP
	CodeBadBurst      Code = 15  // IEBURST
	CodeEndConditions Code = 16  // IEENDCONDITIONS
	CodeNoSCTP        Code = 18  // IENOSCTP
	CodeUDPBlockSize  Code = 20  // IEUDPBLOCKSIZE
	CodeBadTOS        Code = 21  // IEBADTOS
	CodeBadFormat     Code = 24  // IEBADFORMAT
	CodeReverseBidir  Code = 25  // IEREVERSEBIDIR
	CodeBadPort       Code = 26  // IEBADPORT
	CodeRcvTimeout    Code = 31  // IERCVTIMEOUT
	CodeRcvTimeoutRx  Code = 32  // IERVRSONLYRCVTIMEOUT
	CodeSndTimeout    Code = 33  // IESNDTIMEOUT
	CodeConnect       Code = 103 // IECONNECT
	CodeCtrlClose     Code = 109 // IECTRLCLOSE
	CodeMessage       Code = 110 // IEMESSAGE
	CodeRecvParams    Code = 114 // IERECVPARAMS
	CodeRecvResults   Code = 117 // IERECVRESULTS
	CodeServerTerm    Code = 120 // IESERVERTERM
	CodeAccessDenied  Code = 121 // IEACCESSDENIED
	CodeSetNoDelay    Code = 122 // IESETNODELAY
	CodeSetMSS        Code = 123 // IESETMSS
	CodeSetBuf        Code = 124 // IESETBUF
	CodeSetTOS        Code = 125 // IESETTOS
	CodeProtocol      Code = 131 // IEPROTOCOL
	CodeSetCongestion Code = 134 // IESETCONGESTION
	CodeSetBuf2       Code = 141 // IESETBUF2
	CodeNoMessage     Code = 144 // IENOMSG: nothing received for --rcv-timeout
	CodeUserTimeout   Code = 148 // IESETUSERTIMEOUT
	CodeStreamListen  Code = 202 // IESTREAMLISTEN
	CodeStreamConnect Code = 203 // IESTREAMCONNECT
	CodeStreamAccept  Code = 204 // IESTREAMACCEPT
	CodeStreamWrite   Code = 205 // IESTREAMWRITE
	CodeStreamRead    Code = 206 // IESTREAMREAD
	CodeStreamID      Code = 208 // IESTREAMID
)

// messages are iperf_strerror's texts; perr marks those iperf3 follows with the errno's text.
var messages = map[Code]struct {
	text string
	perr bool
}{
	CodeServerClient:  {"cannot be both server and client", false},
	CodeNoRole:        {"must either be a client (-c) or server (-s)", false},
	CodeServerOnly:    {"some option you are trying to set is server only", false},
	CodeClientOnly:    {"some option you are trying to set is client only", false},
	CodeDuration:      {fmt.Sprintf("test duration too long (maximum = %d seconds)", maxTime), false},
	CodeNumStreams:    {fmt.Sprintf("number of parallel streams too large (maximum = %d)", maxStreams), false},
	CodeBlockSize:     {fmt.Sprintf("block size too large (maximum = %d bytes)", maxBlockSize), false},
	CodeBufSize:       {fmt.Sprintf("socket buffer size too large (maximum = %d bytes)", maxBuffer), false},
	CodeInterval:      {"invalid report interval (min = 0.1, max = 60 seconds)", false},
	CodeMSS:           {fmt.Sprintf("TCP MSS too large (maximum = %d bytes)", maxMSS), false},
	CodeNoSendfile:    {"this OS does not support sendfile", false},
	CodeOmit:          {"bogus value for --omit", false},
	CodeUnimplemented: {"an option you are trying to set is not implemented yet", false},
	CodeBadBurst:      {fmt.Sprintf("invalid burst count (maximum = %d)", maxBurst), false},
	CodeEndConditions: {"only one test end condition (-t, -n, -k) may be specified", false},
	CodeNoSCTP:        {"no SCTP support available", false},
	CodeUDPBlockSize:  {fmt.Sprintf("block size invalid (minimum = %d bytes, maximum = %d bytes)", minUDPBlockSize, maxUDPBlockSize), false},
	CodeBadTOS:        {"bad TOS value (must be between 0 and 255 inclusive)", false},
	CodeBadFormat:     {"bad format specifier (valid formats are in the set [kmgtKMGT])", false},
	CodeReverseBidir:  {"cannot be both reverse and bidirectional", false},
	CodeBadPort:       {"port number must be between 1 and 65535 inclusive", false},
	CodeRcvTimeout:    {"receive timeout value is incorrect or not in range", true},
	CodeRcvTimeoutRx:  {"client receive timeout is valid only in receiving mode", true},
	CodeSndTimeout:    {"send timeout value is incorrect or not in range", true},
	100:               {"unable to create a new test", true},
	101:               {"test initialization failed", true},
	102:               {"unable to start listener for connections", true},
	CodeConnect:       {"unable to connect to server", true},
	104:               {"unable to accept connection from client", true},
	105:               {"unable to send cookie to server", true},
	106:               {"unable to receive cookie at server", true},
	107:               {"unable to write to the control socket", true},
	108:               {"unable to read from the control socket", true},
	CodeCtrlClose:     {"control socket has closed unexpectedly", false},
	CodeMessage:       {"received an unknown control message", false},
	111:               {"unable to send control message", true},
	112:               {"unable to receive control message", true},
	113:               {"unable to send parameters to server", true},
	CodeRecvParams:    {"unable to receive parameters from client", true},
	115:               {"unable to package results", true},
	116:               {"unable to send results", true},
	CodeRecvResults:   {"unable to receive results", true},
	118:               {"select failed", true},
	119:               {"the client has terminated", false},
	CodeServerTerm:    {"the server has terminated", false},
	CodeAccessDenied:  {"the server is busy running a test. try again later", false},
	CodeSetNoDelay:    {"unable to set TCP/SCTP NODELAY", true},
	CodeSetMSS:        {"unable to set TCP/SCTP MSS", true},
	CodeSetBuf:        {"unable to set socket buffer size", true},
	CodeSetTOS:        {"unable to set IP TOS", true},
	CodeProtocol:      {"protocol does not exist", false},
	CodeSetCongestion: {"unable to set TCP_CONGESTION: Supplied congestion control algorithm not supported on this host", false},
	CodeSetBuf2:       {"socket buffer size not set correctly", false},
	142:               {"test authorization failed", false},
	CodeNoMessage:     {"idle timeout for receiving data", false},
	145:               {"unable to set IP Do-Not-Fragment flag", false},
	// iperf3 3.12's words for a failed TCP_USER_TIMEOUT, a copy of IESETMSS's.
	CodeUserTimeout:   {"unable to set TCP/SCTP MSS", true},
	200:               {"unable to create a new stream", true},
	201:               {"unable to initialize stream", true},
	CodeStreamListen:  {"unable to start stream listener", true},
	CodeStreamConnect: {"unable to connect stream", true},
	CodeStreamAccept:  {"unable to accept stream connection", true},
	CodeStreamWrite:   {"unable to write to stream socket", true},
	CodeStreamRead:    {"unable to read from stream socket", true},
	207:               {"stream socket has closed unexpectedly", false},
	CodeStreamID:      {"stream has an invalid id", false},
}

// Error is an iperf3 error: a Code, the system error behind it when there is one (Errno, sent
// to the peer as iperf3 sends errno), and what we know beyond both (Err, kept local).
type Error struct {
	Code  Code
	Errno syscall.Errno
	Err   error
}

// Error reads as iperf3's message; an errno's text follows where iperf3 adds it, or else the
// underlying error when there is one.
func (e *Error) Error() string {
	m, ok := messages[e.Code]
	if !ok {
		m.text, m.perr = fmt.Sprintf("int_errno=%d", e.Code), true
	}
	switch {
	case m.perr && e.Errno != 0:
		return m.text + ": " + e.Errno.Error()
	case e.Err != nil:
		return m.text + ": " + e.Err.Error()
	}
	return m.text
}

func (e *Error) Unwrap() error { return e.Err }

// fail wraps err into an iperf3 error with code, keeping the errno a system call left in it.
// An err that already is an iperf3 error keeps its own code.
func fail(code Code, err error) error {
	var ie *Error
	if errors.As(err, &ie) {
		return err
	}
	e := &Error{Code: code, Err: err}
	errors.As(err, &e.Errno)
	return e
}

// ErrAccessDenied is what RunClient returns when the server is busy with another test.
var ErrAccessDenied = &Error{Code: CodeAccessDenied}

// TimedOut says whether err ended a test that stopped moving: nothing received for
// --rcv-timeout, or data unacknowledged for --snd-timeout (TCP_USER_TIMEOUT's ETIMEDOUT).
func TimedOut(err error) bool {
	var ie *Error
	return errors.As(err, &ie) && (ie.Code == CodeNoMessage || ie.Errno == syscall.ETIMEDOUT)
}

// Is makes errors.Is(err, ErrAccessDenied) and the like match on the code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Errno == 0 && t.Err == nil
}

// errnoOf reads an errno a peer sent; nonsense (negative) means none.
func errnoOf(n int32) syscall.Errno {
	if n < 0 {
		return 0
	}
	return syscall.Errno(n)
}
