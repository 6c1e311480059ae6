//! The `Database` custom resource (`databases.example.com/v1`, namespaced): `spec.rotation` is a
//! counter users raise to ask for a new password; `status.rotation` is the last rotation the
//! operator completed. Its credentials live in the Secret `<name>-credentials` (key `password`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The group of the `Database` resource.
pub const GROUP: &str = "example.com";
/// The namespace everything in the walkthrough lives in.
pub const NAMESPACE: &str = "default";
/// The finalizer the operator puts on every Database (its cleanup drops the database user and
/// the Secret: no garbage collector runs next to a bare API server).
pub const FINALIZER: &str = "databases.example.com/cleanup";

/// What a user asks for.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(group = "example.com", version = "v1", kind = "Database", namespaced, status = "DatabaseStatus")]
pub struct DatabaseSpec {
    /// Raise it to ask for a new password (a rotation).
    #[serde(default)]
    pub rotation: u64,
}

/// What the operator did.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
pub struct DatabaseStatus {
    /// The last rotation completed: the Secret holds a password made for it.
    #[serde(default)]
    pub rotation: u64,
}

/// The name of a Database's credentials Secret.
pub fn secret_name(database: &str) -> String {
    format!("{database}-credentials")
}
