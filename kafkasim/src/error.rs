//! The crate's error type.

use kafka_protocol::ResponseError;

/// What can go wrong between a client and the fake broker, on either side of the wire.
///
/// The broker's own handling never returns these to a peer: a malformed request closes that
/// connection (or is answered with the protocol error Kafka would send) and the error is recorded.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The transport failed (a reset, a refused dial, EOF mid-frame).
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    /// The peer closed the connection where a response was expected.
    #[error("the connection closed before a response arrived")]
    Closed,
    /// A frame's size prefix is negative.
    #[error("frame size {0} is negative")]
    NegativeFrame(i32),
    /// A frame's size prefix is above the bound ([`crate::codec::REQUEST_BYTES_MAX`] for
    /// requests, [`crate::codec::RESPONSE_BYTES_MAX`] for responses).
    #[error("frame of {size} bytes is above the bound of {max} bytes")]
    FrameTooLarge {
        /// The size the prefix claims.
        size: usize,
        /// The bound.
        max: usize,
    },
    /// The API key is not one the protocol defines.
    #[error("unknown API key {0}")]
    UnknownApiKey(i16),
    /// The API key is known but this version cannot be parsed or is not served.
    #[error("API key {api_key} version {version} is not supported")]
    UnsupportedVersion {
        /// The API key.
        api_key: i16,
        /// The requested version.
        version: i16,
    },
    /// The bytes do not decode as the message they claim to be (truncated or malformed).
    #[error("malformed {what}: {reason}")]
    Malformed {
        /// What was being decoded.
        what: &'static str,
        /// The decoder's message.
        reason: String,
    },
    /// A message could not be encoded at the negotiated version (a field set that the version
    /// does not have).
    #[error("cannot encode {what}: {reason}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The encoder's message.
        reason: String,
    },
    /// A response carried a correlation id other than the request's.
    #[error("response correlation id {got} does not match the request's {expected}")]
    CorrelationMismatch {
        /// The request's id.
        expected: i32,
        /// The response's id.
        got: i32,
    },
    /// A response's error code, named as Kafka names it (`REBALANCE_IN_PROGRESS`, …).
    #[error("the broker answered {name:?} ({code})", name = .0, code = .0.code())]
    Response(ResponseError),
}

/// Turns a response's error code into a `Result`: `0` is `Ok`, anything else
/// [`Error::Response`] with the code's [`ResponseError`] name.
///
/// # Errors
/// [`Error::Response`] when `code` is not `0`.
pub fn check_code(code: i16) -> Result<(), Error> {
    match ResponseError::try_from_code(code) {
        None => Ok(()),
        Some(e) => Err(Error::Response(e)),
    }
}
