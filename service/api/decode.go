package api

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// BadRequest returns a 400 error naming the field.
func BadRequest(code, field, format string, a ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Field: field, Message: fmt.Sprintf(format, a...)}
}

// strictOptions are the options of every request decoder: the
// encoding/json/v2 semantics (github.com/go-json-experiment/json, the
// proposal's reference implementation) rather than encoding/json's. We
// use the library instead of a hand-written tokenizer because it already
// is the strict JSON the API promises (additionalProperties: false in
// docs/openapi.yaml): it refuses a repeated member name (encoding/json
// keeps the last), matches names case-sensitively (encoding/json takes
// "ID" for "id"), refuses invalid UTF-8 and data after the value, and
// with RejectUnknownMembers refuses a member the type does not declare.
var strictOptions = json.JoinOptions(
	json.RejectUnknownMembers(true),
	json.MatchCaseInsensitiveNames(false),
	jsontext.AllowDuplicateNames(false),
	jsontext.AllowInvalidUTF8(false),
)

// DecodeStrict decodes exactly one JSON object from r into v, refusing
// anything but an object at the top (null included), repeated or
// unknown members, names in another case, wrong types and trailing
// data. Every error names the field when there is one.
func DecodeStrict(r io.Reader, v any) *Error {
	b, err := io.ReadAll(r)
	if err != nil {
		return jsonError(err)
	}
	return decodeStrictBytes(b, v)
}

func decodeStrictBytes(b []byte, v any) *Error {
	t := bytes.TrimLeft(b, " \t\r\n")
	if len(t) == 0 {
		return BadRequest(CodeMalformedJSON, "", "malformed JSON: empty body (want a JSON object)")
	}
	if t[0] != '{' {
		// json.Unmarshal would take null as "leave v alone": a body
		// must be an object.
		kind := jsontext.Kind(t[0])
		if !strings.ContainsRune(`n"ft[-0123456789`, rune(t[0])) {
			return BadRequest(CodeMalformedJSON, "", "malformed JSON at byte %d: %q does not begin a JSON value", len(b)-len(t), t[0])
		}
		return BadRequest(CodeWrongType, "", "want a JSON object, got %s", kindName(kind))
	}
	if err := json.Unmarshal(b, v, strictOptions); err != nil {
		return jsonError(err)
	}
	return nil
}

// kindName says in words what a JSON kind is.
func kindName(k jsontext.Kind) string {
	switch k {
	case 'n':
		return "JSON null"
	case 'f', 't':
		return "true/false"
	case '"':
		return "a string"
	case '0', '-', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return "a number"
	case '[':
		return "an array"
	case '{':
		return "an object"
	}
	return "no JSON value"
}

// fieldOf turns a JSON pointer (/values/3) into the API's field name
// (values[3]).
func fieldOf(p jsontext.Pointer) string {
	var sb strings.Builder
	for tok := range p.Tokens() {
		if _, err := strconv.ParseUint(tok, 10, 32); err == nil && sb.Len() > 0 {
			sb.WriteString("[" + tok + "]")
			continue
		}
		if sb.Len() > 0 {
			sb.WriteByte('.')
		}
		sb.WriteString(tok)
	}
	return sb.String()
}

// jsonError maps a decoding error to an API error naming the field.
func jsonError(err error) *Error {
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: CodeTooLarge,
			Message: fmt.Sprintf("request body larger than %d bytes", tooBig.Limit)}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return BadRequest(CodeMalformedJSON, "", "malformed JSON: the body ends inside a value")
	case errors.As(err, &syn):
		field := fieldOf(syn.JSONPointer)
		if errors.Is(err, jsontext.ErrDuplicateName) {
			return BadRequest(CodeDuplicateField, field, "member %s appears more than once (at byte %d)", field, syn.ByteOffset)
		}
		return BadRequest(CodeMalformedJSON, field, "malformed JSON at byte %d: %v", syn.ByteOffset, syn.Err)
	case errors.As(err, &sem):
		field := fieldOf(sem.JSONPointer)
		if errors.Is(err, json.ErrUnknownName) {
			return BadRequest(CodeUnknownField, field, "unknown field %q (names are case-sensitive)", field)
		}
		want := "?"
		if sem.GoType != nil {
			want = jsonTypeName(sem.GoType.String())
		}
		if sem.JSONKind == '0' && field != "" && sem.GoType != nil && !strings.HasPrefix(sem.GoType.String(), "string") {
			return BadRequest(CodeOutOfRange, field, "%s: %s does not fit %s", field, Truncate(string(sem.JSONValue)), want)
		}
		if field == "" {
			return BadRequest(CodeWrongType, "", "want a JSON object, got %s", kindName(sem.JSONKind))
		}
		return BadRequest(CodeWrongType, field, "%s: want %s, got %s", field, want, kindName(sem.JSONKind))
	}
	return BadRequest(CodeMalformedJSON, "", "malformed JSON: %v", err)
}

// jsonTypeName says in JSON words what a Go type wants.
func jsonTypeName(goType string) string {
	switch {
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map["), strings.HasPrefix(goType, "struct"), strings.Contains(goType, "."):
		return "an object"
	case strings.HasPrefix(goType, "float"), strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "a number (" + goType + ")"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "true or false"
	}
	return goType
}

// MaxIDLen is the longest client-chosen report ID.
const MaxIDLen = 64

// CheckReportID checks a client-chosen report ID: 1–64 characters of
// A–Z a–z 0–9 . _ : -.
func CheckReportID(id string) *Error {
	if id == "" {
		return BadRequest(CodeMissingField, "id", "id is required: a client-chosen report ID (1–%d characters of A–Z a–z 0–9 . _ : -)", MaxIDLen)
	}
	if len(id) > MaxIDLen {
		return BadRequest(CodeInvalidValue, "id", "id is %d bytes long; at most %d", len(id), MaxIDLen)
	}
	for _, c := range []byte(id) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return BadRequest(CodeInvalidValue, "id", "id %q has a character outside A–Z a–z 0–9 . _ : -", Truncate(id))
		}
	}
	return nil
}

// Truncate shortens s for a message.
func Truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// rawReport is the wire form of a report before validation: values stay
// raw so that each element's error names its index.
type rawReport struct {
	ID      *string          `json:"id"`
	Epsilon *float64         `json:"epsilon"`
	Values  []jsontext.Value `json:"values"`
	Mean    *float64         `json:"mean"`
}

// parsed is a report body's fields before validation.
type parsed struct {
	id        *string
	epsilon   *float64
	hasValues bool
	values    []*float64
	// mean is nil when absent or JSON null.
	mean *float64
}

// DecodeReport reads a report body strictly and validates it against the
// collection configuration (CheckReport). Nothing about it is stored or
// charged unless it returns no error. The common shape is parsed by a
// small dedicated parser; anything else by the strict general decoder,
// which words the errors.
func DecodeReport(r io.Reader, cfg *Config) (Report, *Error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return Report{}, jsonError(err)
	}
	f, ok := fastReport(b)
	if !ok {
		var e *Error
		if f, e = slowReport(b); e != nil {
			return Report{}, e
		}
	}
	return f.report(cfg)
}

// slowReport decodes with the strict general decoder, naming the field
// of any error.
func slowReport(b []byte) (parsed, *Error) {
	var raw rawReport
	if e := decodeStrictBytes(b, &raw); e != nil {
		return parsed{}, e
	}
	f := parsed{id: raw.ID, epsilon: raw.Epsilon, hasValues: raw.Values != nil, mean: raw.Mean}
	if f.hasValues {
		f.values = make([]*float64, len(raw.Values))
		for k, v := range raw.Values {
			x, isNull, e := parseValue(v, k)
			if e != nil {
				return parsed{}, e
			}
			if !isNull {
				f.values[k] = &x
			}
		}
	}
	return f, nil
}

// report checks the required fields and the values.
func (f parsed) report(cfg *Config) (Report, *Error) {
	var rep Report
	if f.id == nil {
		return rep, CheckReportID("")
	}
	rep.ID = *f.id
	if f.epsilon != nil {
		rep.Epsilon = *f.epsilon
	} else if cfg.Mode == ModeLocal {
		return rep, BadRequest(CodeMissingField, "epsilon", "epsilon is required: the per-report ε the device spent (the configuration's report_epsilon, %g)", cfg.ReportEpsilon)
	}
	if !f.hasValues {
		return rep, BadRequest(CodeMissingField, "values", "values is required: one value or null per catalogue item (%d)", len(cfg.Items))
	}
	rep.Values = f.values
	rep.Mean = f.mean
	if e := CheckReport(cfg, rep); e != nil {
		return rep, e
	}
	return rep, nil
}

// parseValue reads one element of values: null or a JSON number. The
// field name is formatted only for an error (this runs for every cell of
// every report).
func parseValue(v jsontext.Value, k int) (x float64, isNull bool, e *Error) {
	v = bytes.TrimSpace(v)
	if len(v) == 0 {
		return 0, false, BadRequest(CodeMalformedJSON, valueField(k), "%s is empty", valueField(k))
	}
	switch c := v[0]; {
	case c == 'n':
		return 0, true, nil
	case c == '-' || (c >= '0' && c <= '9'):
		f, err := strconv.ParseFloat(string(v), 64)
		if err != nil || math.IsInf(f, 0) {
			return 0, false, BadRequest(CodeOutOfRange, valueField(k), "%s = %s is not a finite number", valueField(k), Truncate(string(v)))
		}
		return f, false, nil
	case c == '"':
		return 0, false, BadRequest(CodeWrongType, valueField(k), "%s: want a number or null, got a string", valueField(k))
	case c == 't' || c == 'f':
		return 0, false, BadRequest(CodeWrongType, valueField(k), "%s: want a number or null, got true/false", valueField(k))
	case c == '[':
		return 0, false, BadRequest(CodeWrongType, valueField(k), "%s: want a number or null, got an array", valueField(k))
	case c == '{':
		return 0, false, BadRequest(CodeWrongType, valueField(k), "%s: want a number or null, got an object", valueField(k))
	}
	return 0, false, BadRequest(CodeMalformedJSON, valueField(k), "%s is not a JSON value", valueField(k))
}

func valueField(k int) string { return "values[" + strconv.Itoa(k) + "]" }

// CheckReport validates a report against the configuration: the ID, the
// ε (equal to report_epsilon in local mode, 0 in central mode), one value
// per catalogue item, each null or in range for the units, and the mean
// report (CheckMean).
func CheckReport(cfg *Config, rep Report) *Error {
	if e := CheckReportID(rep.ID); e != nil {
		return e
	}
	switch cfg.Mode {
	case ModeLocal:
		if math.IsNaN(rep.Epsilon) || math.IsInf(rep.Epsilon, 0) || !(rep.Epsilon > 0) {
			return BadRequest(CodeBadEpsilon, "epsilon", "epsilon must be a positive finite number (the per-report ε, %g), got %g", cfg.ReportEpsilon, rep.Epsilon)
		}
		if math.Abs(rep.Epsilon-cfg.ReportEpsilon) > 1e-12*cfg.ReportEpsilon {
			return BadRequest(CodeBadEpsilon, "epsilon", "epsilon = %g differs from the collection's per-report ε = %g: randomize with the published configuration (GET %s)", rep.Epsilon, cfg.ReportEpsilon, PathConfig)
		}
	default:
		if rep.Epsilon != 0 {
			return BadRequest(CodeBadEpsilon, "epsilon", "epsilon must be 0 or absent in central mode (reports are not randomized; releases are charged), got %g", rep.Epsilon)
		}
	}
	if len(rep.Values) != len(cfg.Items) {
		return BadRequest(CodeInvalidValue, "values", "values has %d entries; want one per catalogue item, %d", len(rep.Values), len(cfg.Items))
	}
	for k, p := range rep.Values {
		if p == nil {
			continue
		}
		if e := checkValue(cfg, *p, k); e != nil {
			return e
		}
	}
	return CheckMean(cfg, rep.Mean)
}

// CheckMean validates a report's mean report: required and finite (and
// within ±max_abs_mean when the configuration states it) in a local-mode
// collection with mean_epsilon > 0, absent otherwise.
func CheckMean(cfg *Config, mean *float64) *Error {
	if cfg.Mode != ModeLocal || cfg.MeanEpsilon == 0 {
		if mean == nil {
			return nil
		}
		if cfg.Mode != ModeLocal {
			return BadRequest(CodeInvalidValue, "mean", "mean is not taken in %s mode (reports carry true ratings; no mean report is randomized): leave it out", cfg.Mode)
		}
		return BadRequest(CodeInvalidValue, "mean", "mean is not taken by this collection (its mean_epsilon is 0: reports carry no mean report): leave it out")
	}
	if mean == nil {
		return BadRequest(CodeMissingField, "mean", "mean is required: the device's noised mean rating at the configuration's mean_epsilon = %g", cfg.MeanEpsilon)
	}
	if v := *mean; math.IsNaN(v) || math.IsInf(v, 0) {
		return BadRequest(CodeOutOfRange, "mean", "mean is not finite")
	}
	if cfg.MaxAbsMean > 0 && math.Abs(*mean) > cfg.MaxAbsMean {
		return BadRequest(CodeOutOfRange, "mean", "mean = %g is beyond ±%g, which the mean report's noise does not reach", *mean, cfg.MaxAbsMean)
	}
	return nil
}

func checkValue(cfg *Config, v float64, k int) *Error {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return BadRequest(CodeOutOfRange, valueField(k), "%s is not finite", valueField(k))
	}
	switch cfg.Units {
	case "levels":
		if v != math.Trunc(v) || v < 1 || v > float64(cfg.Scale.Levels) {
			return BadRequest(CodeOutOfRange, valueField(k), "%s = %g is not a level 1…%d (randomized response reports levels, or null for missing)", valueField(k), v, cfg.Scale.Levels)
		}
	case "normalised":
		if math.Abs(v) > cfg.MaxAbsValue {
			return BadRequest(CodeOutOfRange, valueField(k), "%s = %g is beyond ±%g, which the mechanism's noise does not reach", valueField(k), v, cfg.MaxAbsValue)
		}
	default: // ratings on the declared scale
		sc := cfg.Scale
		if v < sc.Min || v > sc.Max {
			return BadRequest(CodeOutOfRange, valueField(k), "%s = %g is outside the rating scale [%g, %g]", valueField(k), v, sc.Min, sc.Max)
		}
		if sc.Levels >= 2 {
			step := (sc.Max - sc.Min) / float64(sc.Levels-1)
			q := (v - sc.Min) / step
			if math.Abs(q-math.Round(q)) > 1e-9 {
				return BadRequest(CodeOutOfRange, valueField(k), "%s = %g is not one of the %d levels of [%g, %g]", valueField(k), v, sc.Levels, sc.Min, sc.Max)
			}
		}
	}
	return nil
}

// EncodeValues is the canonical text of a report's values: a JSON array
// with null for missing cells, numbers in their shortest form.
func EncodeValues(vals []*float64) []byte {
	b := make([]byte, 0, 2+3*len(vals))
	b = append(b, '[')
	for k, p := range vals {
		if k > 0 {
			b = append(b, ',')
		}
		if p == nil {
			b = append(b, "null"...)
		} else if v := *p; v == math.Trunc(v) && math.Abs(v) < 1e6 && (v != 0 || !math.Signbit(v)) {
			// What AppendFloat's 'g' writes for an integer below 1e6
			// (no exponent), without its digit generation.
			b = strconv.AppendInt(b, int64(v), 10)
		} else {
			b = strconv.AppendFloat(b, v, 'g', -1, 64)
		}
	}
	return append(b, ']')
}

// DecodeValues reads EncodeValues' text back.
func DecodeValues(b []byte) ([]*float64, error) {
	var vals []*float64
	if err := json.Unmarshal(b, &vals); err != nil {
		return nil, fmt.Errorf("api: stored values: %w", err)
	}
	return vals, nil
}

// DecodeReleaseRequest reads an admin release request strictly.
func DecodeReleaseRequest(r io.Reader) (ReleaseRequest, *Error) {
	var req ReleaseRequest
	if e := DecodeStrict(r, &req); e != nil {
		return req, e
	}
	if req.Method == "" {
		return req, BadRequest(CodeMissingField, "method", "method is required (e.g. ldp-rr)")
	}
	if math.IsNaN(req.Epsilon) || math.IsInf(req.Epsilon, 0) || req.Epsilon < 0 {
		return req, BadRequest(CodeBadEpsilon, "epsilon", "epsilon must be finite and ≥ 0, got %g", req.Epsilon)
	}
	if math.IsNaN(req.Delta) || !(req.Delta >= 0 && req.Delta < 1) {
		return req, BadRequest(CodeOutOfRange, "delta", "delta must be in [0, 1), got %g", req.Delta)
	}
	return req, nil
}

// DecodeEmpty reads a body that carries nothing: none at all, or the
// empty object {} (enrolment). null, another value or any member is
// refused.
func DecodeEmpty(r io.Reader) *Error {
	b, err := io.ReadAll(r)
	if err != nil {
		return jsonError(err)
	}
	if len(bytes.TrimLeft(b, " \t\r\n")) == 0 {
		return nil
	}
	var v struct{}
	return decodeStrictBytes(b, &v)
}

// CheckContentType refuses a request body that does not say it is JSON
// (415): contentType is the request's Content-Type header. A request
// without a body (contentLength 0) may omit it.
func CheckContentType(contentType string, contentLength int64) *Error {
	if contentType == "" && contentLength == 0 {
		return nil
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err == nil && mt == "application/json" {
		if cs, ok := params["charset"]; !ok || strings.EqualFold(cs, "utf-8") {
			return nil
		}
	}
	if contentType == "" {
		contentType = "none"
	}
	return &Error{Status: http.StatusUnsupportedMediaType, Code: CodeMediaType,
		Message: fmt.Sprintf("Content-Type %q: send the body as application/json (UTF-8)", Truncate(contentType))}
}
