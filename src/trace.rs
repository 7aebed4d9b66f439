//! Instrumentation behind the `tracing` feature. Without the feature these
//! macros expand to nothing, so the instrumented paths cost nothing.

/// A `tracing` event at trace level, target `viaduct`, or nothing.
macro_rules! trace_event {
    ($($arg:tt)*) => {
        #[cfg(feature = "tracing")]
        tracing::trace!(target: "viaduct", $($arg)*);
    };
}
pub(crate) use trace_event;
