package httpwire

import (
	"errors"
	"strconv"
)

// Error is a refusal: the status to answer (400, 413, 414, 431, 501, 505,
// or 502 for a bad upstream response) and a short reason safe to show the
// client, such as "Content-Length with Transfer-Encoding".
//
// The package returns shared, pre-built *Error values: compare them by
// Status and Reason, and never modify one.
type Error struct {
	Status int
	Reason string
}

// Error returns "httpwire: " followed by the status and the reason.
func (e *Error) Error() string {
	return "httpwire: " + strconv.Itoa(e.Status) + " " + e.Reason
}

// ErrIncomplete means the buffer does not hold a whole head yet and what it
// holds has no error so far: read more and parse again.
var ErrIncomplete = errors.New("httpwire: incomplete head")

// fault names one refusal; requestErrors and responseErrors turn it into
// the *Error each side returns.
type fault uint8

const (
	faultNone fault = iota
	faultBareLF
	faultBareCR
	faultObsFold
	faultSpaceBeforeColon
	faultFieldName
	faultFieldValue
	faultRequestLine
	faultMethod
	faultTarget
	faultVersion
	faultLeadingLines
	faultLineTooLong
	faultHeadTooLarge
	faultTooManyFields
	faultNoHost
	faultTwoHosts
	faultHost
	faultHostMismatch
	faultTwoLengths
	faultLength
	faultLengthAndCoding
	faultTwoCodings
	faultChunkedNotLast
	faultCoding
	faultCoding10
	faultConnection
	faultTooManyOptions
	faultTwoUpgrades
	faultStatusLine
	faultChunkSize
	faultChunkTooLarge
	faultChunkLine
	faultChunkCRLF
	faultTrailerTooLarge
	faultTooManyTrailers
	faultTrailerName
	faultCount
)

// faultText holds each fault's status for a request and its reason.
var faultText = [faultCount]struct {
	status int
	reason string
}{
	faultBareLF:           {400, "bare LF"},
	faultBareCR:           {400, "bare CR"},
	faultObsFold:          {400, "obsolete line folding"},
	faultSpaceBeforeColon: {400, "whitespace before colon"},
	faultFieldName:        {400, "invalid field name"},
	faultFieldValue:       {400, "invalid character in field value"},
	faultRequestLine:      {400, "malformed request line"},
	faultMethod:           {400, "invalid method"},
	faultTarget:           {400, "invalid request target"},
	faultVersion:          {505, "HTTP version not supported"},
	faultLeadingLines:     {400, "too many empty lines before the request line"},
	faultLineTooLong:      {414, "request line too long"},
	faultHeadTooLarge:     {431, "header section too large"},
	faultTooManyFields:    {431, "too many header fields"},
	faultNoHost:           {400, "missing Host"},
	faultTwoHosts:         {400, "duplicate Host"},
	faultHost:             {400, "invalid Host"},
	faultHostMismatch:     {400, "Host differs from the target's authority"},
	faultTwoLengths:       {400, "duplicate Content-Length"},
	faultLength:           {400, "invalid Content-Length"},
	faultLengthAndCoding:  {400, "Content-Length with Transfer-Encoding"},
	faultTwoCodings:       {400, "duplicate Transfer-Encoding"},
	faultChunkedNotLast:   {400, "chunked is not the final transfer coding"},
	faultCoding:           {501, "transfer coding not implemented"},
	faultCoding10:         {400, "Transfer-Encoding in HTTP/1.0"},
	faultConnection:       {400, "invalid Connection field"},
	faultTooManyOptions:   {400, "too many Connection options"},
	faultTwoUpgrades:      {400, "duplicate Upgrade"},
	faultStatusLine:       {400, "malformed status line"},
	faultChunkSize:        {400, "invalid chunk size"},
	faultChunkTooLarge:    {400, "chunk size too large"},
	faultChunkLine:        {400, "chunk line too long"},
	faultChunkCRLF:        {400, "chunk data not followed by CRLF"},
	faultTrailerTooLarge:  {400, "trailer section too large"},
	faultTooManyTrailers:  {400, "too many trailer fields"},
	faultTrailerName:      {400, "forbidden trailer field"},
}

// requestErrors and responseErrors are the pre-built refusals: the first
// with each fault's own status, the second with 502 (a bad upstream
// response), both with the same reasons.
var requestErrors, responseErrors = buildErrors()

func buildErrors() (req, resp [faultCount]*Error) {
	for f := fault(1); f < faultCount; f++ {
		t := faultText[f]
		req[f] = &Error{Status: t.status, Reason: t.reason}
		resp[f] = &Error{Status: 502, Reason: t.reason}
	}
	return req, resp
}

// Refusals returns every *Error the package returns: the refusals of
// requests and chunked bodies (their own statuses) and of responses
// (status 502), each once. An engine can build its answers for them in
// advance, keyed by the pointer. The slice is new; its elements are shared.
func Refusals() []*Error {
	out := make([]*Error, 0, 2*(faultCount-1))
	out = append(out, requestErrors[1:]...)
	return append(out, responseErrors[1:]...)
}
