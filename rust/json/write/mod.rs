//! Writing JSON text: any JSON tree, frozen or plain (`tree`), a `Message`'s object (`message`),
//! and the leaves, strings and numbers, that both write (`leaves`).

pub(crate) mod leaves;
pub(crate) mod message;
pub(crate) mod tree;

pub(crate) use tree::register;
