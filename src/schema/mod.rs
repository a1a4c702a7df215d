//! JSON Schema validation of tool arguments and results.
//!
//! | file          | holds                                                                              |
//! |---------------|------------------------------------------------------------------------------------|
//! | `cost.rs`     | the worst-case number of subschemas one value node meets, bounded before compiling |
//! | `profile.rs`  | the strict object profile of explicit read-only bindings (`mcpferry/purra`): a pure |
//! |               | check that refuses, never trims, a schema outside it                                 |
//! | `tool.rs`     | `ToolSchemas`: a tool's input and output schemas, compiled on first use, applied as |
//! |               | the validation options say (`exposeServerErrors` is `guard::server_text`)          |
//! | `validate.rs` | `CompiledSchema`: one schema checked against the bounds, compiled once, then used for |
//! |               | any number of values; `Violation` (where a value fails, and why, without the value)  |
//!
//! The validator is the `jsonschema` crate (JSON Schema 2020-12 by default; a root `$schema` naming
//! draft 4, 6, 7 or 2019-09 is honoured, any other dialect fails to compile). What this module adds
//! around it is policy, in one place:
//! - **Nothing is fetched.** A `$ref` (or `$schema`) naming a document outside the schema fails the
//!   compilation; the crate is built without its HTTP and file resolvers, and the retriever refuses
//!   everything, so no schema can make the engine open a connection or read a file.
//! - **No coercion.** `"5"` is a string and fails `{"type": "integer"}`; values are never rewritten.
//! - **Bounded.** A schema over `MAX_SCHEMA_BYTES` or nested past `MAX_SCHEMA_DEPTH_LEVELS` is refused
//!   before compiling, and so is one whose references could multiply the work (`cost.rs`); a `pattern` has a program size, DFA cache and backtracking budget
//!   (`limits.rs`), and values are parsed under serde_json's depth limit. Before each validation the
//!   value's levels and nodes are counted against the schema's cost (its in-place chain for the stack,
//!   its checks per node for the time); a value over either bound is not validated and fails
//!   (`Refusal::NotValidated`).
//! - **Short, value-free failures.** A `Violation` is the failing instance path (a JSON Pointer) and
//!   the rule that failed; the value itself is never quoted, and both are cut to a few hundred bytes.
//! - **Formats are annotations**, as 2020-12 specifies by default: `"format": "email"` documents, it
//!   does not reject.

pub mod cost;
pub mod profile;
pub mod tool;
pub mod validate;

pub use validate::{CompiledSchema, Refusal, SchemaError, Violation};
