//! The container provider: the real server in a container through testcontainers, used when the
//! crate is built with the `containers` feature and a Docker engine answers.

use std::io::{Read, Write};
use std::time::Duration;

/// How long the Docker engine has to answer its ping.
pub const PING_TIMEOUT: Duration = Duration::from_secs(2);

/// Whether a Docker engine answers `GET /_ping` at `DOCKER_HOST` (`unix://…` or `tcp://…`) or,
/// when it is unset, at `/var/run/docker.sock`. `Err` says where nobody answered.
///
/// # Errors
/// A one-line reason when no engine answers.
pub fn docker_answers() -> Result<(), String> {
    let host = std::env::var("DOCKER_HOST").unwrap_or_else(|_| "unix:///var/run/docker.sock".to_string());
    let ping = b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n";
    let mut answer = Vec::new();
    let result = if let Some(path) = host.strip_prefix("unix://") {
        std::os::unix::net::UnixStream::connect(path).and_then(|mut s| {
            s.set_read_timeout(Some(PING_TIMEOUT))?;
            s.write_all(ping)?;
            s.take(4096).read_to_end(&mut answer)
        })
    } else if let Some(addr) = host.strip_prefix("tcp://") {
        std::net::TcpStream::connect(addr).and_then(|mut s| {
            s.set_read_timeout(Some(PING_TIMEOUT))?;
            s.write_all(ping)?;
            s.take(4096).read_to_end(&mut answer)
        })
    } else {
        return Err(format!("DOCKER_HOST={host} is neither unix:// nor tcp://"));
    };
    match result {
        Ok(_) if answer.starts_with(b"HTTP/1.") && answer.windows(3).any(|w| w == b"200") => Ok(()),
        Ok(_) => Err(format!("the Docker engine at {host} did not answer its ping with 200")),
        Err(e) => Err(format!("no Docker engine answers at {host} ({e})")),
    }
}

#[cfg(feature = "containers")]
pub use kafka::KafkaContainer;

#[cfg(feature = "containers")]
mod kafka {
    use testcontainers_modules::kafka::apache::{KAFKA_PORT, Kafka};
    use testcontainers_modules::testcontainers::runners::SyncRunner;
    use testcontainers_modules::testcontainers::{Container, ImageExt};

    use crate::Error;
    use crate::counterpart::{Attempt, Counterpart, Provider};

    /// Apache Kafka in the `apache/kafka` image (KRaft, one combined broker and controller),
    /// configured like the local process: every replication factor 1,
    /// `group.initial.rebalance.delay.ms=0`, retention checked every second, the log cleaner
    /// looking for dirty logs every second.
    #[derive(Debug, Clone)]
    pub struct KafkaContainer {
        /// The image tag: the Kafka version (`4.2.0`).
        pub tag: String,
    }

    /// A running Kafka container; dropping it removes the container.
    pub struct RunningKafka {
        container: Container<Kafka>,
        address: String,
        tag: String,
    }

    impl std::fmt::Debug for RunningKafka {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("RunningKafka").field("id", &self.container.id()).field("address", &self.address).finish()
        }
    }

    impl Provider for KafkaContainer {
        fn name(&self) -> &'static str {
            "container"
        }

        fn start(&self) -> Result<Attempt, Error> {
            if let Err(why) = super::docker_answers() {
                return Ok(Attempt::Unavailable(why));
            }
            let start_error = |e: &dyn std::fmt::Display| Error::Start {
                provider: "container",
                reason: format!("apache/kafka:{}: {e}", self.tag),
                logs: None,
            };
            let container = Kafka::default()
                .with_jvm_image()
                .with_tag(self.tag.clone())
                .with_env_var("KAFKA_GROUP_INITIAL_REBALANCE_DELAY_MS", "0")
                .with_env_var("KAFKA_TRANSACTION_STATE_LOG_REPLICATION_FACTOR", "1")
                .with_env_var("KAFKA_TRANSACTION_STATE_LOG_MIN_ISR", "1")
                .with_env_var("KAFKA_SHARE_COORDINATOR_STATE_TOPIC_REPLICATION_FACTOR", "1")
                .with_env_var("KAFKA_SHARE_COORDINATOR_STATE_TOPIC_MIN_ISR", "1")
                .with_env_var("KAFKA_LOG_INITIAL_TASK_DELAY_MS", "1000")
                .with_env_var("KAFKA_LOG_RETENTION_CHECK_INTERVAL_MS", "1000")
                .with_env_var("KAFKA_LOG_CLEANER_BACKOFF_MS", "1000")
                .start()
                .map_err(|e| start_error(&e))?;
            let port = container.get_host_port_ipv4(KAFKA_PORT).map_err(|e| start_error(&e))?;
            let address = format!("127.0.0.1:{port}");
            Ok(Attempt::Ready(Box::new(RunningKafka { container, address, tag: self.tag.clone() })))
        }
    }

    impl Counterpart for RunningKafka {
        fn address(&self) -> &str {
            &self.address
        }

        fn describe(&self) -> String {
            format!("Apache Kafka {}, container {}, {}", self.tag, self.container.id(), self.address)
        }

        fn logs(&self) -> Option<String> {
            let out = self.container.stdout_to_vec().ok()?;
            Some(String::from_utf8_lossy(&out).to_string())
        }
    }

    // `Container` is Send and Sync when its image is; the trait object needs both.
    const _: fn() = || {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RunningKafka>();
    };
}

#[cfg(feature = "containers")]
pub use k3s::K3sContainer;

#[cfg(feature = "containers")]
mod k3s {
    use testcontainers_modules::k3s::{K3s, KUBE_SECURE_PORT};
    use testcontainers_modules::testcontainers::runners::SyncRunner;
    use testcontainers_modules::testcontainers::{Container, ImageExt};

    use crate::Error;
    use crate::counterpart::{Attempt, Counterpart, Provider};

    /// k3s in the `rancher/k3s` image (privileged), as a kube-apiserver. Unlike the local process
    /// it runs controllers: namespaces finish terminating, garbage collection runs.
    #[derive(Debug, Clone)]
    pub struct K3sContainer {
        /// The image tag; `None` for the module's default.
        pub tag: Option<String>,
    }

    /// A running k3s container; dropping it removes the container.
    pub struct RunningK3s {
        container: Container<K3s>,
        kubeconfig: String,
        _conf: std::path::PathBuf,
    }

    impl std::fmt::Debug for RunningK3s {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.debug_struct("RunningK3s")
                .field("id", &self.container.id())
                .field("kubeconfig", &self.kubeconfig)
                .finish()
        }
    }

    impl Provider for K3sContainer {
        fn name(&self) -> &'static str {
            "container"
        }

        fn start(&self) -> Result<Attempt, Error> {
            if let Err(why) = super::docker_answers() {
                return Ok(Attempt::Unavailable(why));
            }
            let start_error = |e: &dyn std::fmt::Display| Error::Start {
                provider: "container",
                reason: format!("k3s: {e}"),
                logs: None,
            };
            let conf = crate::local::work_dir().join(format!("k3s-{}", std::process::id()));
            std::fs::create_dir_all(&conf).map_err(|e| start_error(&e))?;
            let image = K3s::default().with_conf_mount(&conf);
            let request = image.with_privileged(true).with_userns_mode("host");
            let request = match &self.tag {
                Some(tag) => request.with_tag(tag.clone()),
                None => request,
            };
            let container = request.start().map_err(|e| start_error(&e))?;
            let port = container.get_host_port_ipv4(KUBE_SECURE_PORT).map_err(|e| start_error(&e))?;
            let yaml = container.image().read_kube_config().map_err(|e| start_error(&e))?;
            // The kubeconfig names the container's own address: point it at the mapped port.
            let yaml = yaml.replace("https://127.0.0.1:6443", &format!("https://127.0.0.1:{port}"));
            let kubeconfig = conf.join("kubeconfig");
            std::fs::write(&kubeconfig, yaml).map_err(|e| start_error(&e))?;
            let kubeconfig = kubeconfig.to_string_lossy().to_string();
            Ok(Attempt::Ready(Box::new(RunningK3s { container, kubeconfig, _conf: conf })))
        }
    }

    impl Counterpart for RunningK3s {
        fn address(&self) -> &str {
            &self.kubeconfig
        }

        fn describe(&self) -> String {
            format!("k3s, container {}, kubeconfig {}", self.container.id(), self.kubeconfig)
        }

        fn logs(&self) -> Option<String> {
            let out = self.container.stderr_to_vec().ok()?;
            Some(String::from_utf8_lossy(&out).to_string())
        }
    }

    const _: fn() = || {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<RunningK3s>();
    };
}
