//! Authorization (OAuth 2.1). This file is the token-store slice's placeholder; the lead owns it.

pub mod store;
