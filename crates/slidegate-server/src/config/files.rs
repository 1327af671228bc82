//! Which files a configuration path names, and reading them: only regular
//! files (links followed to one), each read to at most
//! [`MAX_FILE_BYTES`] without ever blocking on what is not a file. An
//! entry that cannot be looked at fails the load: a rules file that
//! vanished behind a dangling link must not take its domain's limits away
//! silently.

use std::fs::{self, File, Metadata};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use super::{ConfigError, ConfigErrors};

/// The largest configuration file read (a rules file is a few kilobytes;
/// this refuses a wrong path to a log file or an image).
pub const MAX_FILE_BYTES: u64 = 4 << 20;

/// The most files a directory may hold.
pub const MAX_FILES: usize = 1000;

/// How deep a directory's subdirectories are read.
const MAX_DEPTH: usize = 8;

/// Reads one file, refusing what cannot be a rules file: anything but a
/// regular file (a FIFO would block the read for good, `/dev/zero` never
/// end it), more than [`MAX_FILE_BYTES`], text that is not UTF-8.
pub(crate) fn read(file: &Path) -> Result<String, ConfigError> {
    let cannot = |e: std::io::Error| ConfigError::whole(file, format!("cannot read: {e}"));
    let meta = fs::metadata(file).map_err(cannot)?;
    regular(file, &meta)?;
    let opened = open(file).map_err(cannot)?;
    // What was opened may not be what was looked at a moment before.
    let meta = opened.metadata().map_err(cannot)?;
    regular(file, &meta)?;
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_big(file, &meta.len().to_string()));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    opened.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes).map_err(cannot)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        // It grew while being read.
        return Err(too_big(file, &format!("more than {MAX_FILE_BYTES}")));
    }
    String::from_utf8(bytes).map_err(|e| {
        ConfigError::whole(file, format!("not UTF-8 (byte {} is invalid)", e.utf8_error().valid_up_to()))
    })
}

fn too_big(file: &Path, size: &str) -> ConfigError {
    ConfigError::whole(
        file,
        format!("{size} bytes is more than a configuration file may hold ({MAX_FILE_BYTES})"),
    )
}

/// Opens `file` for reading without waiting for a writer, should it have
/// become a FIFO since it was looked at (the read is refused then).
#[cfg(unix)]
fn open(file: &Path) -> std::io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt as _;
    // O_NONBLOCK, whose value differs between systems; it changes nothing
    // for a regular file.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    const NONBLOCK: i32 = 0o4000;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    const NONBLOCK: i32 = 0x0004;
    fs::OpenOptions::new().read(true).custom_flags(NONBLOCK).open(file)
}

#[cfg(not(unix))]
fn open(file: &Path) -> std::io::Result<File> {
    File::open(file)
}

/// Refuses what is not a regular file, naming what it is.
fn regular(file: &Path, meta: &Metadata) -> Result<(), ConfigError> {
    if meta.is_file() {
        return Ok(());
    }
    Err(ConfigError::whole(
        file,
        format!("{} is not a regular file; rules are read only from files", kind(meta)),
    ))
}

/// What a path that is not a regular file is.
fn kind(meta: &Metadata) -> &'static str {
    let kind = meta.file_type();
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    "it"
}

/// The files `path` names: itself, or a directory's rules files, sorted.
pub(crate) fn files_of(path: &Path) -> Result<Vec<PathBuf>, ConfigErrors> {
    let meta = fs::metadata(path).map_err(|e| one(ConfigError::whole(path, format!("cannot read: {e}"))))?;
    if !meta.is_dir() {
        return Ok(vec![path.to_owned()]);
    }
    let mut walk = Walk { root: path, files: Vec::new(), errors: Vec::new(), dirs: 0 };
    let mut ancestors = Vec::new();
    walk.collect(path, &mut ancestors).map_err(one)?;
    if !walk.errors.is_empty() {
        return Err(ConfigErrors(walk.errors));
    }
    if walk.files.is_empty() {
        return Err(one(ConfigError::whole(path, "the directory holds no rules files (*.yaml, *.yml)")));
    }
    walk.files.sort();
    Ok(walk.files)
}

fn one(error: ConfigError) -> ConfigErrors {
    ConfigErrors(vec![error])
}

/// Whether a directory entry named `name` holds rules: `*.yaml` and
/// `*.yml`, not hidden.
fn is_rules_file(name: &Path) -> bool {
    matches!(name.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) && !is_hidden(name)
}

/// Names starting with `.` are skipped: Kubernetes keeps a ConfigMap's
/// versions in `..data` and `..<timestamp>` beside the links to the
/// current one, and editors keep their swap files there.
fn is_hidden(name: &Path) -> bool {
    name.file_name().is_some_and(|n| n.as_encoded_bytes().starts_with(b"."))
}

/// A directory's walk: the rules files found, and what is wrong.
struct Walk<'p> {
    root: &'p Path,
    files: Vec<PathBuf>,
    /// Entries that cannot be looked at, rules files that are not files.
    errors: Vec<ConfigError>,
    /// Directories read so far.
    dirs: usize,
}

impl Walk<'_> {
    /// Adds `dir`'s rules files, and its subdirectories', down to
    /// [`MAX_DEPTH`]. `ancestors` are the directories it lies in (as
    /// links resolve them), so that a link back up is refused rather than
    /// walked round and round.
    fn collect(&mut self, dir: &Path, ancestors: &mut Vec<PathBuf>) -> Result<(), ConfigError> {
        self.dirs += 1;
        if self.dirs > MAX_FILES {
            return Err(ConfigError::whole(self.root, format!("more than {MAX_FILES} directories")));
        }
        let cannot = |e: std::io::Error| ConfigError::whole(dir, format!("cannot read: {e}"));
        let real = fs::canonicalize(dir).map_err(cannot)?;
        if ancestors.contains(&real) {
            self.errors.push(ConfigError::whole(dir, "a link to a directory it lies in: not read twice"));
            return Ok(());
        }
        if ancestors.len() > MAX_DEPTH {
            self.errors.push(ConfigError::whole(
                dir,
                format!("directories are read at most {MAX_DEPTH} levels deep"),
            ));
            return Ok(());
        }
        ancestors.push(real);
        for entry in fs::read_dir(dir).map_err(cannot)? {
            let path = entry.map_err(cannot)?.path();
            if is_hidden(&path) {
                continue;
            }
            // Follows links: a ConfigMap's files are links into `..data`.
            // A link that leads nowhere (or in a circle) cannot be told
            // from a rules file that went missing: an error, never skipped.
            let meta = match fs::metadata(&path) {
                Ok(meta) => meta,
                Err(e) => {
                    self.errors.push(ConfigError::whole(&path, format!("cannot read: {e}")));
                    continue;
                }
            };
            if meta.is_dir() {
                self.collect(&path, ancestors)?;
            } else if is_rules_file(&path) {
                match regular(&path, &meta) {
                    Ok(()) => self.files.push(path),
                    Err(error) => self.errors.push(error),
                }
                if self.files.len() > MAX_FILES {
                    return Err(ConfigError::whole(self.root, format!("more than {MAX_FILES} rules files")));
                }
            }
        }
        ancestors.pop();
        Ok(())
    }
}

/// What the file system says of the files a configuration path names:
/// which they are, and each one's identity, size and change times (not
/// when it was last read). Equal stamps, nothing to reload: a reload's
/// own reads, or a write to some other file in the directory, change none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Stamps(Result<Vec<(PathBuf, Option<Stamp>)>, String>);

/// One file's identity, size and change times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    device: u64,
    inode: u64,
    len: u64,
    modified: Option<std::time::SystemTime>,
    changed_ns: i128,
}

impl Stamps {
    /// The stamps of the files `path` names.
    pub(crate) fn of(path: &Path) -> Stamps {
        match files_of(path) {
            Ok(files) => Stamps::of_files(files.iter().map(PathBuf::as_path)),
            Err(errors) => Stamps(Err(errors.to_string())),
        }
    }

    /// The stamps of `files`, each as it is (a missing one stamped so).
    pub(crate) fn of_files<'a>(files: impl IntoIterator<Item = &'a Path>) -> Stamps {
        let stamp = |file: &Path| fs::metadata(file).ok().map(|meta| Stamp::of(&meta));
        Stamps(Ok(files.into_iter().map(|file| (file.to_owned(), stamp(file))).collect()))
    }
}

impl Stamp {
    #[cfg(unix)]
    fn of(meta: &Metadata) -> Stamp {
        use std::os::unix::fs::MetadataExt as _;
        Stamp {
            device: meta.dev(),
            inode: meta.ino(),
            len: meta.len(),
            modified: meta.modified().ok(),
            changed_ns: i128::from(meta.ctime()) * 1_000_000_000 + i128::from(meta.ctime_nsec()),
        }
    }

    #[cfg(not(unix))]
    fn of(meta: &Metadata) -> Stamp {
        Stamp { device: 0, inode: 0, len: meta.len(), modified: meta.modified().ok(), changed_ns: 0 }
    }
}
