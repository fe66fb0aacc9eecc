//! kcache-deltafifo (being written).
