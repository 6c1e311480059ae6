//! Simulation tests of the group task against a kafkasim `Cluster` (filled in below).
