//! Real tonic over the simulated network.
