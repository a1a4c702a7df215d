//! Connection stores: the persisted seed of a toolset (catalogue + drift baseline). Owned by the
//! store work; see the module contract in the task description.
