//! Oracle Coherence CE sink (work in progress).
mod client;
