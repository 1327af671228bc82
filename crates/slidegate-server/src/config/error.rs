//! What is wrong with a configuration: every problem found, each with the
//! file, line and column it lies at.

use std::fmt;
use std::path::{Path, PathBuf};

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// The file the problem lies in (or the directory, for a problem of the
    /// whole set, such as a directory without files).
    pub file: PathBuf,
    /// 1-based line, 0 when the problem has no position (an unreadable file).
    pub line: u32,
    /// 1-based column, 0 when the problem has no position.
    pub column: u32,
    /// What is wrong, and what would be right.
    pub message: String,
}

impl ConfigError {
    /// A problem at `line`:`column` of `file`.
    pub fn at(file: &Path, (line, column): (u32, u32), message: impl Into<String>) -> ConfigError {
        ConfigError { file: file.to_owned(), line, column, message: message.into() }
    }

    /// A problem of a whole file (or directory).
    pub fn whole(file: &Path, message: impl Into<String>) -> ConfigError {
        ConfigError::at(file, (0, 0), message)
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if self.line > 0 {
            write!(f, ":{}:{}", self.line, self.column)?;
        }
        write!(f, ": {}", self.message)
    }
}

impl std::error::Error for ConfigError {}

/// Every problem a configuration has (at least one): a configuration is
/// checked whole, so one run of `slidegate serve --check` lists them all.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    /// The problems, in file order.
    pub fn errors(&self) -> &[ConfigError] {
        &self.0
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "{one}"),
            many => {
                write!(f, "{} problems in the configuration:", many.len())?;
                for error in many {
                    write!(f, "\n  {error}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for ConfigErrors {}
