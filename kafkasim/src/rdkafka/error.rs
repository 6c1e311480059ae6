//! Errors as rdkafka names them: [`RDKafkaErrorCode`] (librdkafka's `rd_kafka_resp_err_t`: its
//! negative codes are the client's own, the others Kafka's protocol error codes), [`KafkaError`]
//! (what an operation failed at, with the code) and [`KafkaResult`].
//!
//! Names, numbers and descriptions are librdkafka 2.12's (`rdkafka.h`, `rd_kafka_err2str`), so
//! `Display` prints what rdkafka prints: `MessageTimedOut (Local: Message timed out)`.

use std::fmt;

/// A `Result` whose error is a [`KafkaError`] (rdkafka's `KafkaResult`).
pub type KafkaResult<T> = Result<T, KafkaError>;

macro_rules! error_codes {
    ($($name:ident = $value:literal => $desc:literal,)*) => {
        /// librdkafka's error codes (`rd_kafka_resp_err_t`), by rdkafka's names. Negative values
        /// are librdkafka's local errors; the others are Kafka protocol error codes
        /// (<https://kafka.apache.org/protocol#protocol_error_codes>).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        #[non_exhaustive]
        #[repr(i32)]
        pub enum RDKafkaErrorCode {
            $(#[doc = $desc] $name = $value,)*
        }

        impl RDKafkaErrorCode {
            /// The code with number `code`, or [`RDKafkaErrorCode::Unknown`] (-1) for a number
            /// librdkafka does not know.
            pub fn from_code(code: i32) -> RDKafkaErrorCode {
                match code {
                    $($value => RDKafkaErrorCode::$name,)*
                    _ => RDKafkaErrorCode::Unknown,
                }
            }

            /// librdkafka's description (`rd_kafka_err2str`).
            pub fn description(self) -> &'static str {
                match self {
                    $(RDKafkaErrorCode::$name => $desc,)*
                }
            }
        }
    };
}

error_codes! {
    BadMessage = -199 => "Local: Bad message format",
    BadCompression = -198 => "Local: Invalid compressed data",
    BrokerDestroy = -197 => "Local: Broker handle destroyed for termination",
    Fail = -196 => "Local: Communication failure with broker",
    BrokerTransportFailure = -195 => "Local: Broker transport failure",
    CriticalSystemResource = -194 => "Local: Critical system resource failure",
    Resolve = -193 => "Local: Host resolution failure",
    MessageTimedOut = -192 => "Local: Message timed out",
    PartitionEOF = -191 => "Broker: No more messages",
    UnknownPartition = -190 => "Local: Unknown partition",
    FileSystem = -189 => "Local: File or filesystem error",
    UnknownTopic = -188 => "Local: Unknown topic",
    AllBrokersDown = -187 => "Local: All broker connections are down",
    InvalidArgument = -186 => "Local: Invalid argument or configuration",
    OperationTimedOut = -185 => "Local: Timed out",
    QueueFull = -184 => "Local: Queue full",
    ISRInsufficient = -183 => "Local: ISR count insufficient",
    NodeUpdate = -182 => "Local: Broker node update",
    SSL = -181 => "Local: SSL error",
    WaitingForCoordinator = -180 => "Local: Waiting for coordinator",
    UnknownGroup = -179 => "Local: Unknown group",
    InProgress = -178 => "Local: Operation in progress",
    PreviousInProgress = -177 => "Local: Previous operation in progress",
    ExistingSubscription = -176 => "Local: Existing subscription",
    AssignPartitions = -175 => "Local: Assign partitions",
    RevokePartitions = -174 => "Local: Revoke partitions",
    Conflict = -173 => "Local: Conflicting use",
    State = -172 => "Local: Erroneous state",
    UnknownProtocol = -171 => "Local: Unknown protocol",
    NotImplemented = -170 => "Local: Not implemented",
    Authentication = -169 => "Local: Authentication failure",
    NoOffset = -168 => "Local: No offset stored",
    Outdated = -167 => "Local: Outdated",
    TimedOutQueue = -166 => "Local: Timed out in queue",
    UnsupportedFeature = -165 => "Local: Required feature not supported by broker",
    WaitCache = -164 => "Local: Awaiting cache update",
    Interrupted = -163 => "Local: Operation interrupted",
    KeySerialization = -162 => "Local: Key serialization error",
    ValueSerialization = -161 => "Local: Value serialization error",
    KeyDeserialization = -160 => "Local: Key deserialization error",
    ValueDeserialization = -159 => "Local: Value deserialization error",
    Partial = -158 => "Local: Partial response",
    ReadOnly = -157 => "Local: Read-only object",
    NoEnt = -156 => "Local: No such entry",
    Underflow = -155 => "Local: Read underflow",
    InvalidType = -154 => "Local: Invalid type",
    Retry = -153 => "Local: Retry operation",
    PurgeQueue = -152 => "Local: Purged in queue",
    PurgeInflight = -151 => "Local: Purged in flight",
    Fatal = -150 => "Local: Fatal error",
    Inconsistent = -149 => "Local: Inconsistent state",
    GaplessGuarantee = -148 => "Local: Gap-less ordering would not be guaranteed if proceeding",
    PollExceeded = -147 => "Local: Maximum application poll interval (max.poll.interval.ms) exceeded",
    UnknownBroker = -146 => "Local: Unknown broker",
    NotConfigured = -145 => "Local: Functionality not configured",
    Fenced = -144 => "Local: This instance has been fenced by a newer instance",
    Application = -143 => "Local: Application generated error",
    AssignmentLost = -142 => "Local: Group partition assignment lost",
    Noop = -141 => "Local: No operation performed",
    AutoOffsetReset = -140 => "Local: No offset to automatically reset to",
    LogTruncation = -139 => "Local: Partition log truncation detected",
    InvalidDifferentRecord = -138 => "Local: an invalid record in the same batch caused the failure of this message too",
    DestroyBroker = -137 => "Local: Broker handle destroyed without termination",
    Unknown = -1 => "Unknown broker error",
    NoError = 0 => "Success",
    OffsetOutOfRange = 1 => "Broker: Offset out of range",
    InvalidMessage = 2 => "Broker: Invalid message",
    UnknownTopicOrPartition = 3 => "Broker: Unknown topic or partition",
    InvalidMessageSize = 4 => "Broker: Invalid message size",
    LeaderNotAvailable = 5 => "Broker: Leader not available",
    NotLeaderForPartition = 6 => "Broker: Not leader for partition",
    RequestTimedOut = 7 => "Broker: Request timed out",
    BrokerNotAvailable = 8 => "Broker: Broker not available",
    ReplicaNotAvailable = 9 => "Broker: Replica not available",
    MessageSizeTooLarge = 10 => "Broker: Message size too large",
    StaleControllerEpoch = 11 => "Broker: StaleControllerEpochCode",
    OffsetMetadataTooLarge = 12 => "Broker: Offset metadata string too large",
    NetworkException = 13 => "Broker: Broker disconnected before response received",
    CoordinatorLoadInProgress = 14 => "Broker: Coordinator load in progress",
    CoordinatorNotAvailable = 15 => "Broker: Coordinator not available",
    NotCoordinator = 16 => "Broker: Not coordinator",
    InvalidTopic = 17 => "Broker: Invalid topic",
    MessageBatchTooLarge = 18 => "Broker: Message batch larger than configured server segment size",
    NotEnoughReplicas = 19 => "Broker: Not enough in-sync replicas",
    NotEnoughReplicasAfterAppend = 20 => "Broker: Message(s) written to insufficient number of in-sync replicas",
    InvalidRequiredAcks = 21 => "Broker: Invalid required acks value",
    IllegalGeneration = 22 => "Broker: Specified group generation id is not valid",
    InconsistentGroupProtocol = 23 => "Broker: Inconsistent group protocol",
    InvalidGroupId = 24 => "Broker: Invalid group.id",
    UnknownMemberId = 25 => "Broker: Unknown member",
    InvalidSessionTimeout = 26 => "Broker: Invalid session timeout",
    RebalanceInProgress = 27 => "Broker: Group rebalance in progress",
    InvalidCommitOffsetSize = 28 => "Broker: Commit offset data size is not valid",
    TopicAuthorizationFailed = 29 => "Broker: Topic authorization failed",
    GroupAuthorizationFailed = 30 => "Broker: Group authorization failed",
    ClusterAuthorizationFailed = 31 => "Broker: Cluster authorization failed",
    InvalidTimestamp = 32 => "Broker: Invalid timestamp",
    UnsupportedSASLMechanism = 33 => "Broker: Unsupported SASL mechanism",
    IllegalSASLState = 34 => "Broker: Request not valid in current SASL state",
    UnsupportedVersion = 35 => "Broker: API version not supported",
    TopicAlreadyExists = 36 => "Broker: Topic already exists",
    InvalidPartitions = 37 => "Broker: Invalid number of partitions",
    InvalidReplicationFactor = 38 => "Broker: Invalid replication factor",
    InvalidReplicaAssignment = 39 => "Broker: Invalid replica assignment",
    InvalidConfig = 40 => "Broker: Configuration is invalid",
    NotController = 41 => "Broker: Not controller for cluster",
    InvalidRequest = 42 => "Broker: Invalid request",
    UnsupportedForMessageFormat = 43 => "Broker: Message format on broker does not support request",
    PolicyViolation = 44 => "Broker: Policy violation",
    OutOfOrderSequenceNumber = 45 => "Broker: Broker received an out of order sequence number",
    DuplicateSequenceNumber = 46 => "Broker: Broker received a duplicate sequence number",
    InvalidProducerEpoch = 47 => "Broker: Producer attempted an operation with an old epoch",
    InvalidTransactionalState = 48 => "Broker: Producer attempted a transactional operation in an invalid state",
    InvalidProducerIdMapping = 49 => "Broker: Producer attempted to use a producer id which is not currently assigned to its transactional id",
    InvalidTransactionTimeout = 50 => "Broker: Transaction timeout is larger than the maximum value allowed by the broker's max.transaction.timeout.ms",
    ConcurrentTransactions = 51 => "Broker: Producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing",
    TransactionCoordinatorFenced = 52 => "Broker: Indicates that the transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer",
    TransactionalIdAuthorizationFailed = 53 => "Broker: Transactional Id authorization failed",
    SecurityDisabled = 54 => "Broker: Security features are disabled",
    OperationNotAttempted = 55 => "Broker: Operation not attempted",
    KafkaStorageError = 56 => "Broker: Disk error when trying to access log file on disk",
    LogDirNotFound = 57 => "Broker: The user-specified log directory is not found in the broker config",
    SaslAuthenticationFailed = 58 => "Broker: SASL Authentication failed",
    UnknownProducerId = 59 => "Broker: Unknown Producer Id",
    ReassignmentInProgress = 60 => "Broker: Partition reassignment is in progress",
    DelegationTokenAuthDisabled = 61 => "Broker: Delegation Token feature is not enabled",
    DelegationTokenNotFound = 62 => "Broker: Delegation Token is not found on server",
    DelegationTokenOwnerMismatch = 63 => "Broker: Specified Principal is not valid Owner/Renewer",
    DelegationTokenRequestNotAllowed = 64 => "Broker: Delegation Token requests are not allowed on this connection",
    DelegationTokenAuthorizationFailed = 65 => "Broker: Delegation Token authorization failed",
    DelegationTokenExpired = 66 => "Broker: Delegation Token is expired",
    InvalidPrincipalType = 67 => "Broker: Supplied principalType is not supported",
    NonEmptyGroup = 68 => "Broker: The group is not empty",
    GroupIdNotFound = 69 => "Broker: The group id does not exist",
    FetchSessionIdNotFound = 70 => "Broker: The fetch session ID was not found",
    InvalidFetchSessionEpoch = 71 => "Broker: The fetch session epoch is invalid",
    ListenerNotFound = 72 => "Broker: No matching listener",
    TopicDeletionDisabled = 73 => "Broker: Topic deletion is disabled",
    FencedLeaderEpoch = 74 => "Broker: Leader epoch is older than broker epoch",
    UnknownLeaderEpoch = 75 => "Broker: Leader epoch is newer than broker epoch",
    UnsupportedCompressionType = 76 => "Broker: Unsupported compression type",
    StaleBrokerEpoch = 77 => "Broker: Broker epoch has changed",
    OffsetNotAvailable = 78 => "Broker: Leader high watermark is not caught up",
    MemberIdRequired = 79 => "Broker: Group member needs a valid member ID",
    PreferredLeaderNotAvailable = 80 => "Broker: Preferred leader was not available",
    GroupMaxSizeReached = 81 => "Broker: Consumer group has reached maximum size",
    FencedInstanceId = 82 => "Broker: Static consumer fenced by other consumer with same group.instance.id",
    EligibleLeadersNotAvailable = 83 => "Broker: Eligible partition leaders are not available",
    ElectionNotNeeded = 84 => "Broker: Leader election not needed for topic partition",
    NoReassignmentInProgress = 85 => "Broker: No partition reassignment is in progress",
    GroupSubscribedToTopic = 86 => "Broker: Deleting offsets of a topic while the consumer group is subscribed to it",
    InvalidRecord = 87 => "Broker: Broker failed to validate record",
    UnstableOffsetCommit = 88 => "Broker: There are unstable offsets that need to be cleared",
    ThrottlingQuotaExceeded = 89 => "Broker: Throttling quota has been exceeded",
    ProducerFenced = 90 => "Broker: There is a newer producer with the same transactionalId which fences the current one",
    ResourceNotFound = 91 => "Broker: Request illegally referred to resource that does not exist",
    DuplicateResource = 92 => "Broker: Request illegally referred to the same resource twice",
    UnacceptableCredential = 93 => "Broker: Requested credential would not meet criteria for acceptability",
    InconsistentVoterSet = 94 => "Broker: Indicates that the either the sender or recipient of a voter-only request is not one of the expected voters",
    InvalidUpdateVersion = 95 => "Broker: Invalid update version",
    FeatureUpdateFailed = 96 => "Broker: Unable to update finalized features due to server error",
    PrincipalDeserializationFailure = 97 => "Broker: Request principal deserialization failed during forwarding",
    UnknownTopicId = 100 => "Broker: Unknown topic id",
    FencedMemberEpoch = 110 => "Broker: The member epoch is fenced by the group coordinator",
    UnreleasedInstanceId = 111 => "Broker: The instance ID is still used by another member in the consumer group",
    UnsupportedAssignor = 112 => "Broker: The assignor or its version range is not supported by the consumer group",
    StaleMemberEpoch = 113 => "Broker: The member epoch is stale",
    UnknownSubscriptionId = 117 => "Broker: Client sent a push telemetry request with an invalid or outdated subscription ID",
    TelemetryTooLarge = 118 => "Broker: Client sent a push telemetry request larger than the maximum size the broker will accept",
    RebootstrapRequired = 129 => "Broker: Client metadata is stale, client should rebootstrap to obtain new metadata",
}

impl RDKafkaErrorCode {
    /// The number (librdkafka's `rd_kafka_resp_err_t` value).
    pub fn code(self) -> i32 {
        self as i32
    }
}

impl From<i16> for RDKafkaErrorCode {
    /// The code for a Kafka protocol error code (`0` is [`RDKafkaErrorCode::NoError`]).
    fn from(code: i16) -> RDKafkaErrorCode {
        RDKafkaErrorCode::from_code(i32::from(code))
    }
}

impl fmt::Display for RDKafkaErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{self:?} ({})", self.description())
    }
}

impl std::error::Error for RDKafkaErrorCode {}

/// The outcome of setting a configuration property (librdkafka's `rd_kafka_conf_res_t`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum RDKafkaConfRes {
    /// No such property.
    RD_KAFKA_CONF_UNKNOWN = -2,
    /// The value is not valid for the property.
    RD_KAFKA_CONF_INVALID = -1,
    /// Set.
    RD_KAFKA_CONF_OK = 0,
}

/// What failed, as rdkafka's `KafkaError` says it: the variants a producer (and the consumer to
/// come) surfaces. `Display` is rdkafka's.
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KafkaError {
    /// The client was dropped before the operation completed.
    Canceled,
    /// An invalid configuration: `(result, librdkafka's message, key, value)`.
    ClientConfig(RDKafkaConfRes, String, String, String),
    /// The client could not be created (a configuration inconsistent as a whole, no runtime).
    ClientCreation(String),
    /// A flush did not finish in time ([`RDKafkaErrorCode::OperationTimedOut`]).
    Flush(RDKafkaErrorCode),
    /// An error of the client as a whole (a fatal idempotence error).
    Global(RDKafkaErrorCode),
    /// A consumed message is an error.
    MessageConsumption(RDKafkaErrorCode),
    /// The consumer hit a fatal error and can consume no more (a static member fenced by
    /// another instance with its `group.instance.id`: `FencedInstanceId`).
    MessageConsumptionFatal(RDKafkaErrorCode),
    /// A message was not delivered.
    MessageProduction(RDKafkaErrorCode),
    /// Metadata could not be fetched.
    MetadataFetch(RDKafkaErrorCode),
    /// No message arrived within the poll's timeout.
    NoMessageReceived,
    /// A consumer commit failed.
    ConsumerCommit(RDKafkaErrorCode),
    /// A subscription failed.
    Subscription(String),
    /// Committed offsets could not be fetched.
    OffsetFetch(RDKafkaErrorCode),
    /// Pausing or resuming partitions failed.
    PauseResume(String),
    /// A rebalance failed.
    Rebalance(RDKafkaErrorCode),
    /// Seeking a partition failed.
    Seek(String),
    /// An offset in a topic partition list could not be set.
    SetPartitionOffset(RDKafkaErrorCode),
    /// Storing an offset failed.
    StoreOffset(RDKafkaErrorCode),
}

impl KafkaError {
    /// The error code, when the error carries one (rdkafka's `rdkafka_error_code`).
    pub fn rdkafka_error_code(&self) -> Option<RDKafkaErrorCode> {
        match self {
            KafkaError::Flush(c)
            | KafkaError::Global(c)
            | KafkaError::MessageConsumption(c)
            | KafkaError::MessageConsumptionFatal(c)
            | KafkaError::MessageProduction(c)
            | KafkaError::MetadataFetch(c)
            | KafkaError::ConsumerCommit(c)
            | KafkaError::OffsetFetch(c)
            | KafkaError::Rebalance(c)
            | KafkaError::SetPartitionOffset(c)
            | KafkaError::StoreOffset(c) => Some(*c),
            _ => None,
        }
    }
}

impl fmt::Display for KafkaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KafkaError::Canceled => write!(f, "KafkaError (Client dropped)"),
            KafkaError::ClientConfig(_, desc, key, value) => write!(f, "Client config error: {desc} {key} {value}"),
            KafkaError::ClientCreation(e) => write!(f, "Client creation error: {e}"),
            KafkaError::Flush(e) => write!(f, "Flush error: {e}"),
            KafkaError::Global(e) => write!(f, "Global error: {e}"),
            KafkaError::MessageConsumption(e) => write!(f, "Message consumption error: {e}"),
            KafkaError::MessageConsumptionFatal(e) => write!(f, "(Fatal) Message consumption error: {e}"),
            KafkaError::MessageProduction(e) => write!(f, "Message production error: {e}"),
            KafkaError::MetadataFetch(e) => write!(f, "Meta data fetch error: {e}"),
            KafkaError::NoMessageReceived => write!(f, "No message received within the given poll interval"),
            KafkaError::ConsumerCommit(e) => write!(f, "Consumer commit error: {e}"),
            KafkaError::Subscription(e) => write!(f, "Subscription error: {e}"),
            KafkaError::OffsetFetch(e) => write!(f, "Offset fetch error: {e}"),
            KafkaError::PauseResume(e) => write!(f, "Pause/resume error: {e}"),
            KafkaError::Rebalance(e) => write!(f, "Rebalance error: {e}"),
            KafkaError::Seek(e) => write!(f, "Seek error: {e}"),
            KafkaError::SetPartitionOffset(e) => write!(f, "Set partition offset error: {e}"),
            KafkaError::StoreOffset(e) => write!(f, "Store offset error: {e}"),
        }
    }
}

/// rdkafka 0.39's `Debug` (not always `KafkaError ({Display})`: `MetadataFetch` says "Metadata
/// fetch error" where `Display` says "Meta data", the fatal one puts "(Fatal)" first, and
/// `Canceled`/`NoMessageReceived` carry no prefix of their own).
impl fmt::Debug for KafkaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KafkaError::Canceled => write!(f, "KafkaError (Client dropped)"),
            KafkaError::MessageConsumptionFatal(e) => write!(f, "(Fatal) KafkaError (Message consumption error: {e})"),
            KafkaError::MetadataFetch(e) => write!(f, "KafkaError (Metadata fetch error: {e})"),
            KafkaError::NoMessageReceived => write!(f, "No message received within the given poll interval"),
            other => write!(f, "KafkaError ({other})"),
        }
    }
}

impl std::error::Error for KafkaError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_have_librdkafkas_numbers_and_words() {
        assert_eq!(RDKafkaErrorCode::MessageTimedOut.code(), -192);
        assert_eq!(RDKafkaErrorCode::from(6i16), RDKafkaErrorCode::NotLeaderForPartition);
        assert_eq!(RDKafkaErrorCode::from(46i16), RDKafkaErrorCode::DuplicateSequenceNumber);
        assert_eq!(RDKafkaErrorCode::from(0i16), RDKafkaErrorCode::NoError);
        assert_eq!(RDKafkaErrorCode::from(9999i16), RDKafkaErrorCode::Unknown);
        assert_eq!(RDKafkaErrorCode::MessageTimedOut.to_string(), "MessageTimedOut (Local: Message timed out)");
        let e = KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull);
        assert_eq!(e.to_string(), "Message production error: QueueFull (Local: Queue full)");
        assert_eq!(e.rdkafka_error_code(), Some(RDKafkaErrorCode::QueueFull));
        assert_eq!(format!("{e:?}"), "KafkaError (Message production error: QueueFull (Local: Queue full))");
        let m = KafkaError::MetadataFetch(RDKafkaErrorCode::UnknownPartition);
        assert_eq!(m.to_string(), "Meta data fetch error: UnknownPartition (Local: Unknown partition)");
        assert_eq!(format!("{m:?}"), "KafkaError (Metadata fetch error: UnknownPartition (Local: Unknown partition))");
        let fatal = KafkaError::MessageConsumptionFatal(RDKafkaErrorCode::FencedInstanceId);
        assert!(format!("{fatal:?}").starts_with("(Fatal) KafkaError (Message consumption error: FencedInstanceId"));
        assert_eq!(format!("{:?}", KafkaError::Canceled), "KafkaError (Client dropped)");
    }
}
