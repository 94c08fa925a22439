// Package codec converts Lua values (github.com/yuin/gopher-lua) to and from
// the byte format that game-server scripts store in Redis and in the
// in-memory KV backend.
//
// The wire format is JSON text (RFC 8259, UTF-8, no BOM) with a small set of
// conventions for the Lua values JSON cannot express directly. Other services
// that read or write these values rely on the rules below; changing them is a
// breaking change.
//
// # Values
//
//   - nil is written as null.
//   - booleans are written as true / false.
//   - numbers are JSON numbers formatted by [FormatNumber]: integral values
//     with |x| < 2^53 as plain integers ("5", "-3"; negative zero is written
//     "0", the sign of zero is not preserved), every other finite value with
//     strconv.FormatFloat(x, 'g', -1, 64), the shortest text that parses back
//     to exactly the same float64 ("1.5", "1e+300", "9.007199254740992e+15").
//     NaN and ±Inf cannot be encoded ([ErrNotFinite]).
//   - strings that are valid UTF-8 are JSON strings with the standard escapes:
//     `"` and `\` are backslash-escaped, U+0000..U+001F are written as \b \f
//     \n \r \t or \u00XX; everything else (including < > & and all non-ASCII
//     characters) is written verbatim.
//   - strings that are not valid UTF-8 (binary data) are written as the object
//     {"$bin":"<standard base64 with padding>"}.
//
// # Tables
//
// Metatables are ignored (only raw contents are stored).
//
//   - A table whose keys are exactly the integers 1..n (n >= 1) is a JSON
//     array [v1,...,vn].
//   - The empty table is {}.
//   - Every other table is a JSON object, with its members sorted byte-wise
//     by key so that equal tables always encode to equal bytes.
//
// Object keys are written as follows:
//
//   - a valid UTF-8 string key not starting with "$": the string itself;
//   - a string key starting with "$": one more "$" in front ("$x" is written
//     "$$x");
//   - a number key: "$" + FormatNumber(key), e.g. "$3", "$-1", "$1.5"
//     (NaN/±Inf keys cannot be encoded);
//   - a boolean key: "$true" / "$false";
//   - a string key that is not valid UTF-8: "$b:" + standard base64;
//   - keys of any other type cannot be encoded ([ErrUnsupportedKey]).
//
// The string key "1" and the number key 1 are therefore distinct on the wire
// ("1" versus "$1"), and the table {["$bin"]="x"} is written {"$$bin":"x"}, so
// it cannot be confused with a binary string.
//
// A table reachable from itself is rejected ([ErrCycle]); a table that merely
// appears several times (a DAG) is written once per occurrence. Tables nested
// more than [MaxDepth] levels deep are rejected ([ErrTooDeep]). Because
// gopher-lua stores the integer keys 1..2^26 in a dense array, a value whose
// tables together have more than [MaxSparseSlots] empty slots below their
// largest integer key (e.g. {[5000000]=true}) is rejected ([ErrTooSparse]) by
// both Encode and Decode, so that a few bytes of input can never make Decode
// allocate gigabytes.
//
// Functions, userdata, threads and channels cannot be encoded
// ([ErrUnsupportedType]). Encoding errors are [*EncodeError] values that name
// the key path of the offending value, e.g.
//
//	codec: cannot encode function at key "a.b"
//	codec: cyclic table at key "x"
//
// # Decoding
//
// Decoding accepts any JSON text that satisfies the following, and rejects
// everything else with a [*DecodeError] carrying the byte offset:
//
//   - exactly one JSON value, optionally surrounded by JSON whitespace
//     (trailing garbage is an error);
//   - null, booleans and strings decode to nil, booleans and strings; JSON
//     strings must be valid UTF-8; a \u escape of a lone UTF-16 surrogate
//     decodes to U+FFFD;
//   - numbers decode to float64; numbers that overflow float64 are an error
//     (numbers that underflow become 0 or a subnormal);
//   - an object with exactly one key "$bin" whose value is a string of
//     standard padded base64 decodes to that binary string (a non-string or
//     malformed value is an error);
//   - arrays decode to tables with keys 1..n, element by element, so a null
//     element leaves a hole without shifting later elements;
//   - other objects decode to tables; keys are mapped back as above: "$$..."
//     is the string "$...", "$<JSON number>" is a number key (any valid JSON
//     number is accepted, e.g. "$1.0" is the key 1; one that overflows
//     float64 is an error), "$true" / "$false" are boolean keys, "$b:<base64>"
//     is a binary string key (malformed base64 is an error); any other key
//     starting with "$" (from a foreign producer) is kept as the literal
//     string key. A member whose value is null sets nothing. If a key occurs
//     more than once the last occurrence wins;
//   - nesting of tables deeper than [MaxDepth] is an error.
//
// Tables returned by Decode are created without an *lua.LState (their metatable
// is LNil) and can be pushed into any LState.
//
// [DecodeLenient] returns bytes that are not valid wire format as a Lua string
// of exactly those bytes, for values another service SET as plain text.
package codec
