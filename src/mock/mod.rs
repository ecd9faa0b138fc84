//! The built-in OpenAI-compatible mock server. (Stub: being filled in.)

/// `aiperf mock-server` options.
#[derive(Debug, Clone, clap::Args)]
pub struct MockServerArgs {
    /// Address to bind.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: String,
    /// Port to bind; 0 picks a free port.
    #[arg(long, default_value_t = 8000)]
    pub port: u16,
}

/// Runs the server until Ctrl-C.
pub fn run(_args: MockServerArgs) -> anyhow::Result<()> {
    anyhow::bail!("mock server not implemented yet")
}
pub struct MockServer {
    addr: std::net::SocketAddr,
}
impl MockServer {
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub async fn shutdown(self) {}
}
pub async fn start(_args: MockServerArgs) -> anyhow::Result<MockServer> {
    anyhow::bail!("mock server not implemented yet")
}
