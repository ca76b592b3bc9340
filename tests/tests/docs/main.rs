//! The repository's documentation, checked as a newcomer would meet it: every relative link
//! and anchor resolves ([`links`]), and the programs the README shows build as pasted, from
//! its own dependency lines ([`programs`]).

mod compiler;
mod links;
mod markdown;
mod programs;
