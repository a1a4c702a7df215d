//! The worst-case work of a schema, bounded before it is compiled.
//!
//! Size and depth bounds do not bound validation time: `$ref` lets a schema of a few hundred bytes apply
//! one subschema to the same value twice, and that twice again, 2ⁿ times in all (`a0: anyOf [a1, a1]`,
//! `a1: anyOf [a2, a2]`, …), or double at every level of a nested value (`items: anyOf [#, #]`). The
//! validator has no budget to stop such a walk, so this module computes, from the schema alone, an
//! upper bound on how many subschemas one node of any value is checked against, and a schema whose bound
//! passes `MAX_SCHEMA_APPLICATIONS_PER_NODE` is refused.
//!
//! The bound, for a subschema `s` and a value node `d` levels below the node `s` is applied to:
//! - `g(s, 0) = 1 + Σ g(t, 0)` over the subschemas `t` applied to the same node (`allOf`, `anyOf`, `oneOf`,
//!   `not`, `if`/`then`/`else`, `dependentSchemas`, every reference), and
//! - `g(s, d)`, the larger of the array and object cases (a node is one or the other), each summed over
//!   `s` and the subschemas it applies in place: for an array, the largest `prefixItems` entry or `items`, plus `additionalItems`,
//!   `contains` and `unevaluatedItems`; for an object, the largest `properties` entry (one key reaches one
//!   of them), plus every `patternProperties` entry (a key can match them all), `additionalProperties`,
//!   `unevaluatedProperties` and `propertyNames`; each at `d - 1`.
//!
//! A reference counts every subschema it could name: a pointer is tried against the root and every
//! embedded resource, an anchor matches every `$anchor`/`$dynamicAnchor` of that name and every
//! plain-name `$id`/`id` fragment (`"$id": "#a"`, drafts 4 to 7), a document URI every `$id` ending with
//! it. A reference that names nothing here refuses the schema (fail closed): the validator might resolve
//! it where this bound cannot see, and what it cannot see it cannot bound. Recursion through the value (a tree) keeps `g` constant and is reached as
//! a fixed point; recursion that multiplies passes the bound within a few levels. A reference loop that
//! never descends into the value (`{"$ref": "#"}`) is refused outright: it means nothing (2020-12 leaves
//! it undefined), and inside such a loop the number of paths has no useful bound.
//!
//! Two more costs are per value, so they are returned ([`Cost`]) and checked before each validation:
//! - **Stack.** The validator recurses once per subschema it applies in place (each `$ref` link, each
//!   `allOf` entry, …) and once per level of the value, so the checks open at once are at most
//!   (the longest in-place path + 1) × the value's levels. A schema whose in-place path alone passes
//!   `MAX_SCHEMA_REFERENCE_CHAIN_LINKS` is refused here; the product is checked against
//!   `MAX_VALIDATION_NESTED_CHECKS` for each value.
//! - **Total work.** `g(root, d)` times the value's nodes at depth `d`, summed over depths, is checked
//!   against `MAX_VALIDATION_APPLICATIONS`: the per-node bound alone allows billions over a 2 MiB value.

use crate::limits::{MAX_SCHEMA_APPLICATIONS_PER_NODE, MAX_SCHEMA_REFERENCE_CHAIN_LINKS, MAX_VALUE_DEPTH_LEVELS};
use serde_json::{Map, Value};
use std::collections::HashMap;

/// The subschemas one subschema applies, by how they reach the value.
#[derive(Default)]
struct Node {
    /// Applied to the same value node.
    in_place: Vec<usize>,
    /// One of these reaches a given array item (`prefixItems`, the array form of `items`) …
    item_choices: Vec<usize>,
    /// … and all of these may too.
    item_all: Vec<usize>,
    /// One of these reaches a given property (`properties`) …
    property_choices: Vec<usize>,
    /// … and all of these may too.
    property_all: Vec<usize>,
}

struct Graph<'a> {
    root: &'a Value,
    nodes: Vec<Node>,
    ids: HashMap<*const Value, usize>,
    /// Embedded resources (`$id`) and named anchors, for references.
    resources: Vec<(&'a str, &'a Value)>,
    anchors: Vec<(&'a str, &'a Value)>,
    recursive_anchors: Vec<&'a Value>,
    pending: Vec<(&'a Value, usize)>,
}

/// Why a schema's cost is not bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unbounded {
    /// References loop back to a subschema without descending into the value.
    LoopsInPlace,
    /// Some value node could meet more than `MAX_SCHEMA_APPLICATIONS_PER_NODE` subschemas.
    OverBudget,
    /// Subschemas applied in place, one inside the other, `links` deep: over
    /// `MAX_SCHEMA_REFERENCE_CHAIN_LINKS` (the validator recurses once per link).
    ChainTooLong { links: usize },
    /// A `$ref`/`$dynamicRef` (this text) names no subschema this bound can find.
    Unresolved(String),
}

/// The bounded cost of a schema, for the checks made before each validation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cost {
    /// `g(root, d)` for `d = 0, 1, …`; the last entry holds for every deeper level.
    per_depth: Vec<u64>,
    /// The longest path of subschemas applied in place, in links.
    pub chain_links: usize,
}

impl Cost {
    /// Subschema checks applying the schema to a value with `nodes_per_depth[d]` nodes `d` levels below
    /// its root could take, at most.
    pub fn applications(&self, nodes_per_depth: &[u64]) -> u64 {
        let last = self.per_depth.last().copied().unwrap_or(0);
        nodes_per_depth
            .iter()
            .enumerate()
            .map(|(d, &nodes)| nodes.saturating_mul(self.per_depth.get(d).copied().unwrap_or(last)))
            .fold(0, u64::saturating_add)
    }

    /// Checks open at once (one inside the other), at most, applying the schema to a value `levels` deep.
    pub fn nested_checks(&self, levels: usize) -> u64 {
        (self.chain_links as u64 + 1).saturating_mul(levels as u64)
    }
}

/// Whether applying `schema` could take more than `MAX_SCHEMA_APPLICATIONS_PER_NODE` subschema checks on
/// one node of some value, loops in place, chains more than `MAX_SCHEMA_REFERENCE_CHAIN_LINKS` in place,
/// or has a reference this bound cannot resolve (see the module doc); if none, its [`Cost`]. Runs in
/// time linear in the schema's size for each level of value depth, and stops at a fixed point.
pub fn check(schema: &Value) -> Result<Cost, Unbounded> {
    let mut graph = Graph {
        root: schema,
        nodes: Vec::new(),
        ids: HashMap::new(),
        resources: Vec::new(),
        anchors: Vec::new(),
        recursive_anchors: Vec::new(),
        pending: Vec::new(),
    };
    graph.index_names(schema);
    let root = graph.id(schema);
    graph.build()?;
    let longest = graph
        .fold_in_place(|node, value| node.in_place.iter().map(|&t| value(t) + 1).max().unwrap_or(0))
        .ok_or(Unbounded::LoopsInPlace)?;
    let chain_links = longest.into_iter().max().unwrap_or(0) as usize;
    if chain_links > MAX_SCHEMA_REFERENCE_CHAIN_LINKS {
        return Err(Unbounded::ChainTooLong { links: chain_links });
    }
    let mut previous: Vec<u64> = Vec::new();
    let mut per_depth = Vec::new();
    for depth in 0..=MAX_VALUE_DEPTH_LEVELS {
        let current = graph.layer(depth, &previous).ok_or(Unbounded::LoopsInPlace)?;
        if current[root] > MAX_SCHEMA_APPLICATIONS_PER_NODE {
            return Err(Unbounded::OverBudget);
        }
        if current == previous {
            break;
        }
        per_depth.push(current[root]);
        previous = current;
    }
    Ok(Cost { per_depth, chain_links })
}

impl<'a> Graph<'a> {
    fn id(&mut self, value: &'a Value) -> usize {
        let key = value as *const Value;
        if let Some(&id) = self.ids.get(&key) {
            return id;
        }
        let id = self.nodes.len();
        self.nodes.push(Node::default());
        self.ids.insert(key, id);
        self.pending.push((value, id));
        id
    }

    /// Every `$id`, `$anchor`, `$dynamicAnchor` and `$recursiveAnchor` in the document, wherever it sits.
    /// The plain-name fragment of an `$id`/`id` (`"#a"`, `"r.json#a"`: drafts 4 to 7) is an anchor.
    fn index_names(&mut self, document: &'a Value) {
        let mut stack = vec![document];
        while let Some(value) = stack.pop() {
            match value {
                Value::Object(map) => {
                    for key in ["$id", "id"] {
                        let Some(id) = map.get(key).and_then(Value::as_str) else { continue };
                        match id.split_once('#') {
                            Some((_, fragment)) if !fragment.is_empty() && !fragment.starts_with('/') => {
                                self.anchors.push((fragment, value))
                            }
                            _ => {}
                        }
                        self.resources.push((id, value));
                    }
                    for key in ["$anchor", "$dynamicAnchor"] {
                        if let Some(name) = map.get(key).and_then(Value::as_str) {
                            self.anchors.push((name, value));
                        }
                    }
                    if map.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
                        self.recursive_anchors.push(value);
                    }
                    stack.extend(map.values());
                }
                Value::Array(items) => stack.extend(items),
                _ => {}
            }
        }
    }

    /// The edges of every subschema reachable from the root; a reference that names nothing found here
    /// fails it.
    fn build(&mut self) -> Result<(), Unbounded> {
        while let Some((value, id)) = self.pending.pop() {
            let Value::Object(map) = value else { continue };
            let mut node = Node::default();
            for (keyword, sub) in map {
                match keyword.as_str() {
                    "not" | "if" | "then" | "else" | "contentSchema" => node.in_place.extend(self.schema(sub)),
                    "allOf" | "anyOf" | "oneOf" => node.in_place.extend(self.schemas(sub)),
                    "dependentSchemas" | "dependencies" => node.in_place.extend(self.schema_values(sub)),
                    "$ref" | "$dynamicRef" => {
                        if let Some(reference) = sub.as_str() {
                            let targets = self.resolve(reference);
                            if targets.is_empty() {
                                return Err(Unbounded::Unresolved(reference.to_owned()));
                            }
                            for target in targets {
                                let target = self.id(target);
                                node.in_place.push(target);
                            }
                        }
                    }
                    "$recursiveRef" => {
                        for target in std::iter::once(self.root).chain(self.recursive_anchors.clone()) {
                            let target = self.id(target);
                            node.in_place.push(target);
                        }
                    }
                    "prefixItems" => node.item_choices.extend(self.schemas(sub)),
                    "items" if sub.is_array() => node.item_choices.extend(self.schemas(sub)),
                    "items" | "additionalItems" | "contains" | "unevaluatedItems" => {
                        node.item_all.extend(self.schema(sub))
                    }
                    "properties" => node.property_choices.extend(self.schema_values(sub)),
                    "patternProperties" => node.property_all.extend(self.schema_values(sub)),
                    "additionalProperties" | "unevaluatedProperties" | "propertyNames" => {
                        node.property_all.extend(self.schema(sub))
                    }
                    // Indexed so references into them resolve to known nodes; applied only through those.
                    "$defs" | "definitions" => drop(self.schema_values(sub)),
                    _ => {}
                }
            }
            self.nodes[id] = node;
        }
        Ok(())
    }

    fn schema(&mut self, value: &'a Value) -> Option<usize> {
        (value.is_object() || value.is_boolean()).then(|| self.id(value))
    }

    fn schemas(&mut self, value: &'a Value) -> Vec<usize> {
        value.as_array().map_or_else(Vec::new, |items| items.iter().filter_map(|v| self.schema(v)).collect())
    }

    fn schema_values(&mut self, value: &'a Value) -> Vec<usize> {
        value
            .as_object()
            .map_or_else(Vec::new, |map: &'a Map<String, Value>| map.values().filter_map(|v| self.schema(v)).collect())
    }

    /// Every subschema `reference` could name (a superset: see the module doc).
    fn resolve(&self, reference: &str) -> Vec<&'a Value> {
        let (document, fragment) = reference.split_once('#').unwrap_or((reference, ""));
        let bases: Vec<&'a Value> = if document.is_empty() {
            std::iter::once(self.root).chain(self.resources.iter().map(|(_, v)| *v)).collect()
        } else {
            let last = document.rsplit('/').next().unwrap_or(document);
            self.resources.iter().filter(|(id, _)| id.trim_end_matches('#').ends_with(last)).map(|(_, v)| *v).collect()
        };
        if fragment.is_empty() {
            return bases;
        }
        if fragment.starts_with('/') {
            let pointer = percent_encoding::percent_decode_str(fragment).decode_utf8_lossy();
            return bases.iter().filter_map(|base| base.pointer(&pointer)).collect();
        }
        self.anchors.iter().filter(|(name, _)| *name == fragment).map(|(_, v)| *v).collect()
    }

    /// `g(·, depth)` for every node, from `g(·, depth - 1)` (`below`; empty at depth 0): the larger of the
    /// bounds for an array node and for an object node, each summed over the subschemas applied in place.
    fn layer(&self, depth: usize, below: &[u64]) -> Option<Vec<u64>> {
        if depth == 0 {
            return self.layer_of(|_| 1);
        }
        let g = |t: &usize| below[*t];
        let sum = |ts: &[usize]| ts.iter().map(g).fold(0u64, u64::saturating_add);
        let max = |ts: &[usize]| ts.iter().map(g).max().unwrap_or(0);
        let array = self.layer_of(|node| max(&node.item_choices).saturating_add(sum(&node.item_all)))?;
        let object = self.layer_of(|node| max(&node.property_choices).saturating_add(sum(&node.property_all)))?;
        Some(array.into_iter().zip(object).map(|(a, o)| a.max(o)).collect())
    }

    /// For every node, `own(node)` plus the same for the subschemas it applies in place, transitively
    /// (once per path); `None` when the in-place edges loop.
    fn layer_of(&self, own: impl Fn(&Node) -> u64) -> Option<Vec<u64>> {
        self.fold_in_place(|node, value| node.in_place.iter().map(|&t| value(t)).fold(own(node), u64::saturating_add))
    }

    /// For every node, `combine(node, value of)` once the values of the subschemas it applies in place
    /// are known (a post-order walk of the in-place edges); `None` when they loop.
    fn fold_in_place(&self, combine: impl Fn(&Node, &dyn Fn(usize) -> u64) -> u64) -> Option<Vec<u64>> {
        const UNKNOWN: u64 = u64::MAX;
        let mut values = vec![UNKNOWN; self.nodes.len()];
        let mut on_stack = vec![false; self.nodes.len()];
        for start in 0..self.nodes.len() {
            if values[start] != UNKNOWN {
                continue;
            }
            // Post-order walk of the in-place edges, without recursion.
            let mut stack = vec![(start, 0usize)];
            on_stack[start] = true;
            while let Some((id, next)) = stack.last_mut() {
                let node = &self.nodes[*id];
                if let Some(&child) = node.in_place.get(*next) {
                    *next += 1;
                    if on_stack[child] {
                        return None;
                    }
                    if values[child] == UNKNOWN {
                        on_stack[child] = true;
                        stack.push((child, 0));
                    }
                    continue;
                }
                let id = *id;
                stack.pop();
                on_stack[id] = false;
                values[id] = combine(node, &|t| values[t]).min(UNKNOWN - 1);
            }
        }
        Some(values)
    }
}

#[cfg(test)]
mod tests {
    use super::{check, Unbounded};
    use serde_json::{json, Map, Value};

    fn chain(levels: usize, node: impl Fn(&str) -> Value) -> Value {
        let mut defs = Map::new();
        for i in 0..levels {
            defs.insert(format!("a{i}"), node(&format!("#/$defs/a{}", i + 1)));
        }
        defs.insert(format!("a{levels}"), json!({"type": "integer"}));
        json!({"$defs": defs, "$ref": "#/$defs/a0"})
    }

    #[test]
    fn ordinary_schemas_pass() {
        for schema in [
            json!(true),
            json!({"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "array", "items": {"$ref": "#/$defs/n"}}}, "$defs": {"n": {"type": "integer"}}}),
            // Trees: recursion through the value, once per level.
            json!({"type": "object", "properties": {"left": {"$ref": "#"}, "right": {"$ref": "#"}}}),
            json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}}, {"type": "object", "additionalProperties": {"$ref": "#"}}]}),
            json!({"$defs": {"node": {"$anchor": "node", "properties": {"children": {"items": {"$ref": "#node"}}}}}, "$ref": "#node"}),
            // A wide union of shared definitions, as generators emit.
            json!({"$defs": {"x": {"type": "string"}}, "anyOf": (0..200).map(|_| json!({"$ref": "#/$defs/x"})).collect::<Vec<_>>()}),
            // A linear chain of references.
            chain(60, |next| json!({"allOf": [{"$ref": next}]})),
            // Draft 4 to 7 name subschemas with plain-name ids.
            json!({"definitions": {"n": {"$id": "#n", "properties": {"c": {"$ref": "#n"}}}}, "$ref": "#n"}),
            json!({"definitions": {"n": {"id": "#n", "type": "integer"}}, "items": {"$ref": "#n"}}),
        ] {
            assert!(check(&schema).is_ok(), "{schema}");
        }
    }

    #[test]
    fn the_cost_tells_the_chain_and_the_checks_per_depth() {
        let cost = check(&chain(60, |next| json!({"allOf": [{"$ref": next}]}))).unwrap();
        // Each link is the allOf node and its $ref entry; the root's $ref is one more.
        assert_eq!(cost.chain_links, 121);
        assert_eq!(cost.nested_checks(3), 122 * 3);
        let cost =
            check(&json!({"type": "array", "items": {"anyOf": [{"type": "integer"}, {"type": "string"}]}})).unwrap();
        assert_eq!(cost.chain_links, 1);
        // The root array once, then 3 checks per item, at any depth past the first.
        assert_eq!(cost.applications(&[1, 1_000]), 1 + 3_000);
        assert_eq!(cost.applications(&[1, 1_000, 10]), 1 + 3_000);
    }

    #[test]
    fn long_chains_and_unresolved_references_are_refused() {
        assert_eq!(check(&chain(200, |next| json!({"$ref": next}))), Err(Unbounded::ChainTooLong { links: 201 }));
        assert_eq!(check(&json!({"$ref": "#a1"})), Err(Unbounded::Unresolved("#a1".to_owned())));
        assert_eq!(check(&json!({"$ref": "other.json"})), Err(Unbounded::Unresolved("other.json".to_owned())));
    }

    #[test]
    fn loops_in_place_are_refused() {
        for schema in [
            json!({"$ref": "#"}),
            json!({"allOf": [{"$ref": "#"}]}),
            json!({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"type": "string"}, {"$ref": "#/$defs/a"}]}}, "properties": {"x": {"$ref": "#/$defs/a"}}}),
        ] {
            assert_eq!(check(&schema), Err(Unbounded::LoopsInPlace), "{schema}");
        }
    }

    #[test]
    fn doubling_references_are_caught() {
        assert_eq!(
            Err(Unbounded::OverBudget),
            check(&chain(20, |next| json!({"anyOf": [{"$ref": next}, {"$ref": next}]})))
        );
        // Doubling at each level of the value rather than in place.
        assert_eq!(Err(Unbounded::OverBudget), check(&json!({"items": {"anyOf": [{"$ref": "#"}, {"$ref": "#"}]}})));
        assert_eq!(Err(Unbounded::OverBudget), check(&json!({"items": {"$ref": "#"}, "contains": {"$ref": "#"}})));
        assert_eq!(
            Err(Unbounded::OverBudget),
            check(&json!({"patternProperties": {"a": {"$ref": "#"}, "b": {"$ref": "#"}}}))
        );
        // Through anchors and $id-relative documents too.
        assert_eq!(
            Err(Unbounded::OverBudget),
            check(&json!({"$anchor": "r", "items": {"allOf": [{"$ref": "#r"}, {"$ref": "#r"}]}}))
        );
        assert_eq!(
            Err(Unbounded::OverBudget),
            check(
                &json!({"$id": "http://x.invalid/r.json", "items": {"allOf": [{"$ref": "r.json"}, {"$ref": "r.json"}]}})
            )
        );
    }
}
