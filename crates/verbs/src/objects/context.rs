//! An open device (`struct ibv_context`): queries, and the objects a
//! context creates directly (PDs, CQs, completion channels).

use super::*;

/// An open device (`struct ibv_context`).
pub struct Context {
    pub(super) ops: Arc<dyn DeviceOps>,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.ops.name())
            .finish()
    }
}

impl Context {
    /// Opens `name` through `provider`.
    ///
    /// # Errors
    /// The provider's open error.
    pub fn open(provider: &dyn Provider, name: &str) -> Result<Arc<Context>> {
        Ok(Arc::new(Context {
            ops: provider.open(name)?,
        }))
    }

    /// Opens a soft NIC with `config` (address auto-picked unless set).
    ///
    /// # Errors
    /// Binding the UDP socket failed.
    pub fn open_soft(config: DeviceConfig) -> Result<Arc<Context>> {
        let p = SoftProvider { config };
        let name = p
            .device_names()?
            .into_iter()
            .next()
            .unwrap_or_else(|| "soft0".into());
        Context::open(&p, &name)
    }

    /// The provider operations (for tools that need the raw handles).
    pub fn ops(&self) -> &dyn DeviceOps {
        &*self.ops
    }

    /// The soft device, when this context is one.
    pub fn soft(&self) -> Option<&rdmakit_soft::Device> {
        self.ops.as_soft()
    }

    /// Device name.
    pub fn name(&self) -> String {
        self.ops.name()
    }

    /// `ibv_query_device`.
    ///
    /// # Errors
    /// Provider errors.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        self.ops.query_device()
    }

    /// `ibv_query_port`.
    ///
    /// # Errors
    /// `EINVAL` for a port that does not exist.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        self.ops.query_port(port)
    }

    /// `ibv_query_gid`.
    ///
    /// # Errors
    /// `EINVAL` for a bad port or index.
    pub fn query_gid(&self, port: u8, index: u32) -> Result<Gid> {
        self.ops.query_gid(port, index)
    }

    /// `ibv_query_pkey`.
    ///
    /// # Errors
    /// `EINVAL` for a bad port or index.
    pub fn query_pkey(&self, port: u8, index: u16) -> Result<u16> {
        self.ops.query_pkey(port, index)
    }

    /// `ibv_alloc_pd`.
    ///
    /// # Errors
    /// `EINVAL` when `max_pd` is reached.
    pub fn alloc_pd(self: &Arc<Self>) -> Result<Arc<Pd>> {
        let handle = self.ops.alloc_pd()?;
        Ok(Arc::new(Pd {
            ctx: Arc::clone(self),
            handle,
        }))
    }

    /// `ibv_create_comp_channel`.
    ///
    /// # Errors
    /// Provider errors.
    pub fn create_comp_channel(self: &Arc<Self>) -> Result<Arc<CompChannel>> {
        let handle = self.ops.create_comp_channel()?;
        Ok(Arc::new(CompChannel {
            ctx: Arc::clone(self),
            handle,
        }))
    }

    /// `ibv_create_cq` with room for `cqe` completions.
    ///
    /// # Errors
    /// `EINVAL` for `cqe` outside `1..=max_cqe` or when `max_cq` is reached.
    pub fn create_cq(
        self: &Arc<Self>,
        cqe: u32,
        channel: Option<&Arc<CompChannel>>,
    ) -> Result<Arc<Cq>> {
        let handle = self.ops.create_cq(cqe, channel.map(|c| c.handle))?;
        Ok(Arc::new(Cq {
            ctx: Arc::clone(self),
            handle,
            _channel: channel.cloned(),
        }))
    }

    /// `ibv_get_async_event` with a timeout.
    pub fn get_async_event(&self, timeout: Duration) -> Option<AsyncEvent> {
        self.ops.get_async_event(timeout)
    }
}
