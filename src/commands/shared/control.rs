//! Which running server to control: `dpctl device` picks a `dpctl serve`
//! (by resource), `dpctl dra device` a `dpctl dra serve` (by driver); both
//! take `--control PATH` for one socket and otherwise look in the server's
//! control directory. One definition, its flag names and help per role.

use crate::commands::Ctx;
use clap::Args;
use std::fmt::Debug;
use std::marker::PhantomData;
use std::path::PathBuf;

/// What differs between the servers a [`ControlTarget`] picks.
pub trait ControlRole: Debug + Send + Sync + 'static {
    /// The flag that names which one (`resource`, `driver`).
    const SELECT: &'static str;
    /// Its help.
    const SELECT_HELP: &'static str;
    /// The help of `--control`, naming where sockets are looked for.
    const CONTROL_HELP: &'static str;
    /// The control sockets found when `--control` is not given, sorted;
    /// `select` is the value of [`Self::SELECT`].
    fn discover(ctx: &Ctx, select: Option<&str>) -> Vec<PathBuf>;
}

/// Which running server to control.
#[derive(Debug, Args)]
pub struct ControlTarget<R: ControlRole> {
    /// Which one, by the role's name for it.
    #[arg(long = R::SELECT, value_name = "NAME", help = R::SELECT_HELP)]
    pub select: Option<String>,
    /// A specific control socket.
    #[arg(long, value_name = "PATH", help = R::CONTROL_HELP)]
    pub control: Option<PathBuf>,
    #[arg(skip)]
    role: PhantomData<R>,
}

impl<R: ControlRole> ControlTarget<R> {
    /// The control sockets to ask: `--control` (under `--root`), else the role's discovered ones.
    pub fn sockets(&self, ctx: &Ctx) -> Vec<PathBuf> {
        match &self.control {
            Some(p) => vec![ctx.paths.host(p)],
            None => R::discover(ctx, self.select.as_deref()),
        }
    }
}
