//! Coming from kube-runtime (TODO).
