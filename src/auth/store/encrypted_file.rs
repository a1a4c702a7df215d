//! Tokens in one encrypted file, under a key the host must give: 32 raw bytes, or a passphrase
//! stretched with PBKDF2-HMAC-SHA256. Crypto is ring's (already linked for TLS): AES-256-GCM, a fresh
//! random nonce for every write, the header authenticated as associated data, so a wrong key and a
//! changed byte anywhere in the file are both caught (AES-GCM cannot tell the two apart; the error
//! names both). The key and the contents never appear in an error or in `Debug`.
//!
//! File layout (version 1), all of it written at once:
//!
//! | bytes | field                                                                  |
//! |-------|------------------------------------------------------------------------|
//! | 8     | magic `mcpftok\0`                                                      |
//! | 1     | format version (1)                                                     |
//! | 1     | key kind: 1 raw key, 2 passphrase                                      |
//! | 4+16  | passphrase only: PBKDF2 iterations (big-endian u32), then the salt     |
//! | 12    | nonce                                                                  |
//! | rest  | AES-256-GCM of the whole map as JSON, then its 16-byte tag             |
//!
//! Writes go to a temporary file (mode 0600 on Unix) in the same directory, flushed, then renamed
//! over the file: a reader sees the old map or the new one, never half of one. Within one process the
//! store's operations run one at a time; across processes every write (a read, a change, a write)
//! holds an exclusive lock on a `<file>.lock` beside it, so two processes sharing the file do not lose
//! each other's changes. The file is read again for every operation, so a change made by another
//! process is seen at once.
//!
//! The same lock is the claim on spending a refresh token across processes
//! ([`TokenStore::lock_across_processes`]): held from reading the tokens to writing the new ones, this
//! store's own writes meanwhile going on under it. It is `flock(2)` on a descriptor opened
//! close-on-exec (as Rust opens every file), so no child process inherits it, and the kernel releases
//! it when the holding process dies. It is only ever tried, never waited for in the kernel: a waiter
//! looks again after a pause, within its deadline.

use super::{on_blocking_pool, TokenStore};
use crate::error::{McpError, Result};
use crate::limits::{
    OAUTH_REQUEST_TIMEOUT_MS, TOKEN_CLAIM_POLL_MAX_MS, TOKEN_CLAIM_POLL_MIN_MS, TOKEN_FILE_MAX_BYTES,
    TOKEN_FILE_MIN_PASSPHRASE_CHARS, TOKEN_FILE_PBKDF2_ITERATIONS, TOKEN_FILE_PBKDF2_MAX_ITERATIONS,
};
use futures_util::future::BoxFuture;
use parking_lot::Mutex;
use ring::aead::{Aad, LessSafeKey, Nonce, UnboundKey, AES_256_GCM, NONCE_LEN};
use ring::rand::{SecureRandom, SystemRandom};
use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MAGIC: &[u8; 8] = b"mcpftok\0";
const FORMAT_VERSION: u8 = 1;
const KIND_RAW_KEY: u8 = 1;
const KIND_PASSPHRASE: u8 = 2;
/// Bytes of the AES-256 key, which is also the length a raw key must have.
pub const TOKEN_FILE_KEY_BYTES: usize = 32;
const SALT_BYTES: usize = 16;

/// The key of an encrypted token file. `Debug` shows which kind it is, nothing of it.
#[derive(Clone)]
pub enum TokenFileKey {
    /// Exactly [`TOKEN_FILE_KEY_BYTES`] random bytes, used as the AES-256 key as they are.
    Raw([u8; TOKEN_FILE_KEY_BYTES]),
    /// A passphrase of at least [`TOKEN_FILE_MIN_PASSPHRASE_CHARS`] characters.
    Passphrase(String),
}

impl std::fmt::Debug for TokenFileKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            TokenFileKey::Raw(_) => "TokenFileKey::Raw(..)",
            TokenFileKey::Passphrase(_) => "TokenFileKey::Passphrase(..)",
        })
    }
}

impl TokenFileKey {
    pub fn raw(bytes: &[u8]) -> Result<Self> {
        let key = bytes.try_into().map_err(|_| {
            McpError::config(format!(
                "createEncryptedFileTokenStore: a key given as bytes must be exactly {TOKEN_FILE_KEY_BYTES} bytes (got {}); or give a passphrase string",
                bytes.len()
            ))
        })?;
        Ok(TokenFileKey::Raw(key))
    }

    pub fn passphrase(text: &str) -> Result<Self> {
        if text.chars().count() < TOKEN_FILE_MIN_PASSPHRASE_CHARS {
            return Err(McpError::config(format!(
                "createEncryptedFileTokenStore: a passphrase needs at least {TOKEN_FILE_MIN_PASSPHRASE_CHARS} characters"
            )));
        }
        Ok(TokenFileKey::Passphrase(text.to_owned()))
    }

    fn kind(&self) -> u8 {
        match self {
            TokenFileKey::Raw(_) => KIND_RAW_KEY,
            TokenFileKey::Passphrase(_) => KIND_PASSPHRASE,
        }
    }
}

/// How a file's key is made: the raw key, or PBKDF2 over the passphrase with these parameters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Derivation {
    RawKey,
    Pbkdf2 { iterations: NonZeroU32, salt: [u8; SALT_BYTES] },
}

impl Derivation {
    fn header(&self) -> Vec<u8> {
        let mut header = Vec::with_capacity(MAGIC.len() + 2 + 4 + SALT_BYTES);
        header.extend_from_slice(MAGIC);
        header.push(FORMAT_VERSION);
        match self {
            Derivation::RawKey => header.push(KIND_RAW_KEY),
            Derivation::Pbkdf2 { iterations, salt } => {
                header.push(KIND_PASSPHRASE);
                header.extend_from_slice(&iterations.get().to_be_bytes());
                header.extend_from_slice(salt);
            }
        }
        header
    }
}

/// A file split into its parts; `header` is everything before the nonce (the associated data).
struct Sealed<'a> {
    header: &'a [u8],
    derivation: Derivation,
    nonce: [u8; NONCE_LEN],
    ciphertext: &'a [u8],
}

pub struct EncryptedFileTokenStore {
    inner: Arc<Mutex<FileState>>,
    held: Arc<Mutex<HeldLock>>,
    path: PathBuf,
    key_kind: &'static str,
}

/// The lock on `<file>.lock` while claims of this store hold it (one descriptor for all of them); this
/// store's writes meanwhile use it instead of taking their own.
#[derive(Default)]
struct HeldLock {
    holders: usize,
    file: Option<Arc<std::fs::File>>,
}

/// One claim's share of [`HeldLock`]; the last one to drop closes the descriptor, which unlocks.
struct FileClaim(Arc<Mutex<HeldLock>>);

impl Drop for FileClaim {
    fn drop(&mut self) {
        let mut held = self.0.lock();
        held.holders -= 1;
        if held.holders == 0 {
            held.file = None;
        }
    }
}

/// Everything an operation needs, behind the lock that makes this process's operations take turns.
struct FileState {
    path: PathBuf,
    key: TokenFileKey,
    /// The AES key for the derivation last used, so a passphrase is stretched once per salt, not per operation.
    derived: Option<(Derivation, LessSafeKey)>,
    random: SystemRandom,
    held: Arc<Mutex<HeldLock>>,
}

impl std::fmt::Debug for EncryptedFileTokenStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EncryptedFileTokenStore").field("path", &self.path).field("key", &self.key_kind).finish()
    }
}

impl EncryptedFileTokenStore {
    /// A store in the file at `path` (created by the first write; its directory must exist). Nothing
    /// is read yet: a wrong key or a damaged file fails the first operation, with `McpError::Storage`.
    pub fn open(path: impl Into<PathBuf>, key: TokenFileKey) -> Result<Self> {
        let path = path.into();
        if path.as_os_str().is_empty() || path.to_string_lossy().contains('\0') {
            return Err(McpError::config("createEncryptedFileTokenStore needs a file path"));
        }
        // Fixed now: a later change of the process's working directory does not move the store.
        let path = std::path::absolute(&path)
            .map_err(|e| McpError::config(format!("createEncryptedFileTokenStore: {}: {e}", path.display())))?;
        let key_kind = match key {
            TokenFileKey::Raw(_) => "raw key",
            TokenFileKey::Passphrase(_) => "passphrase",
        };
        let held = Arc::new(Mutex::new(HeldLock::default()));
        let state =
            FileState { path: path.clone(), key, derived: None, random: SystemRandom::new(), held: held.clone() };
        Ok(Self { inner: Arc::new(Mutex::new(state)), held, path, key_kind })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn run<T: Send + 'static>(
        &self,
        what: &'static str,
        work: impl FnOnce(&mut FileState) -> Result<T> + Send + 'static,
    ) -> BoxFuture<'static, Result<T>> {
        let inner = self.inner.clone();
        Box::pin(on_blocking_pool(what, move || work(&mut inner.lock())))
    }
}

impl TokenStore for EncryptedFileTokenStore {
    fn get(&self, key: &str) -> BoxFuture<'static, Result<Option<String>>> {
        let key = key.to_owned();
        self.run("get", move |state| Ok(state.read()?.remove(&key)))
    }

    fn set(&self, key: &str, value: &str) -> BoxFuture<'static, Result<()>> {
        let (key, value) = (key.to_owned(), value.to_owned());
        self.run("set", move |state| {
            state.update(|entries| {
                entries.insert(key, value);
                true
            })
        })
    }

    fn delete(&self, key: &str) -> BoxFuture<'static, Result<()>> {
        let key = key.to_owned();
        self.run("delete", move |state| state.update(|entries| entries.remove(&key).is_some()))
    }

    /// The file: every store opened on it in this process holds the same values.
    fn identity(&self) -> BoxFuture<'static, Result<String>> {
        let identity = format!("file:{}", self.path.display());
        Box::pin(async move { Ok(identity) })
    }

    /// The lock on `<file>.lock`, tried (open and `flock` with `LOCK_NB` are quick, so on this thread,
    /// and a claim dropped while waiting leaves nothing behind) and tried again after a pause until
    /// `within` has passed.
    fn lock_across_processes(&self, within: Duration) -> BoxFuture<'static, Result<Option<Box<dyn Send + Sync>>>> {
        let (held, path) = (self.held.clone(), self.path.clone());
        Box::pin(async move {
            let until = tokio::time::Instant::now() + within;
            let mut pause = Duration::from_millis(TOKEN_CLAIM_POLL_MIN_MS);
            loop {
                {
                    let mut lock = held.lock();
                    if lock.file.is_none() {
                        lock.file = try_lock(&path)?.map(Arc::new);
                    }
                    if lock.file.is_some() {
                        lock.holders += 1;
                        return Ok(Some(Box::new(FileClaim(held.clone())) as Box<dyn Send + Sync>));
                    }
                }
                if tokio::time::Instant::now() + pause > until {
                    return Err(McpError::Storage(format!(
                        "token store {}: another process held its lock for longer than {} ms",
                        path.display(),
                        within.as_millis()
                    )));
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(TOKEN_CLAIM_POLL_MAX_MS));
            }
        })
    }
}

/// Opens `<path>.lock` (created empty, 0600 on Unix; close-on-exec, as Rust opens every file) and tries
/// its exclusive lock: `None` when another descriptor holds it.
fn try_lock(path: &Path) -> Result<Option<std::fs::File>> {
    let failed = |what: &str, e: std::io::Error| {
        McpError::Storage(format!("token store {}: cannot {what} its lock file: {e}", path.display()))
    };
    let mut name = path.to_path_buf().into_os_string();
    name.push(".lock");
    let mut options = std::fs::OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let lock = options.open(&name).map_err(|e| failed("open", e))?;
    match lock.try_lock() {
        Ok(()) => Ok(Some(lock)),
        Err(std::fs::TryLockError::WouldBlock) => Ok(None),
        Err(std::fs::TryLockError::Error(e)) => Err(failed("lock", e)),
    }
}

type Entries = BTreeMap<String, String>;

impl FileState {
    fn error(&self, what: impl std::fmt::Display) -> McpError {
        McpError::Storage(format!("token store {}: {what}", self.path.display()))
    }

    /// The map in the file (empty when there is no file yet).
    fn read(&mut self) -> Result<Entries> {
        Ok(self.read_with_derivation()?.0)
    }

    /// Reads the map, lets `change` edit it, and writes it back when `change` says it changed
    /// anything, holding the cross-process lock throughout. A file that cannot be read is never
    /// overwritten.
    fn update(&mut self, change: impl FnOnce(&mut Entries) -> bool) -> Result<()> {
        let _locked = self.lock_exclusively()?;
        let (mut entries, derivation) = self.read_with_derivation()?;
        if !change(&mut entries) {
            return Ok(());
        }
        let derivation = match derivation {
            Some(found) => found,
            None => self.new_derivation()?,
        };
        let sealed = self.seal(derivation, &entries)?;
        // Never write a file this store would refuse to read back.
        if sealed.len() as u64 > TOKEN_FILE_MAX_BYTES {
            return Err(
                self.error(format_args!("would grow past {TOKEN_FILE_MAX_BYTES} bytes; the value was not stored"))
            );
        }
        self.write_atomically(&sealed)
    }

    fn read_with_derivation(&mut self) -> Result<(Entries, Option<Derivation>)> {
        let bytes = match std::fs::File::open(&self.path) {
            Ok(file) => {
                let mut bytes = Vec::new();
                file.take(TOKEN_FILE_MAX_BYTES + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|e| self.error(format_args!("cannot be read: {e}")))?;
                bytes
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Entries::new(), None)),
            Err(e) => return Err(self.error(format_args!("cannot be opened: {e}"))),
        };
        if bytes.len() as u64 > TOKEN_FILE_MAX_BYTES {
            return Err(self.error(format_args!("is larger than {TOKEN_FILE_MAX_BYTES} bytes; not a token store file")));
        }
        let sealed = self.parse(&bytes)?;
        let key = self.key_for(sealed.derivation)?;
        let mut plaintext = sealed.ciphertext.to_vec();
        let opened = key
            .open_in_place(Nonce::assume_unique_for_key(sealed.nonce), Aad::from(sealed.header), &mut plaintext)
            .map_err(|_| self.error("cannot be decrypted: the key is wrong, or the file was altered"))?;
        let entries =
            serde_json::from_slice(opened).map_err(|_| self.error("decrypted, but does not hold a token map"))?;
        Ok((entries, Some(sealed.derivation)))
    }

    fn parse<'a>(&self, bytes: &'a [u8]) -> Result<Sealed<'a>> {
        let damaged = || self.error("is not an mcpferry token file, or it is damaged");
        let fixed = MAGIC.len() + 2;
        if bytes.len() < fixed || &bytes[..MAGIC.len()] != MAGIC {
            return Err(damaged());
        }
        if bytes[MAGIC.len()] != FORMAT_VERSION {
            return Err(
                self.error(format_args!("has format version {}, which this mcpferry cannot read", bytes[MAGIC.len()]))
            );
        }
        let (derivation, header_len) = match bytes[MAGIC.len() + 1] {
            KIND_RAW_KEY => (Derivation::RawKey, fixed),
            KIND_PASSPHRASE => {
                let header_len = fixed + 4 + SALT_BYTES;
                let params = bytes.get(fixed..header_len).ok_or_else(damaged)?;
                let iterations = u32::from_be_bytes(params[..4].try_into().expect("4 bytes"));
                if !(TOKEN_FILE_PBKDF2_ITERATIONS..=TOKEN_FILE_PBKDF2_MAX_ITERATIONS).contains(&iterations) {
                    return Err(damaged());
                }
                let iterations = NonZeroU32::new(iterations).ok_or_else(damaged)?;
                let salt = params[4..].try_into().expect("SALT_BYTES bytes");
                (Derivation::Pbkdf2 { iterations, salt }, header_len)
            }
            _ => return Err(damaged()),
        };
        let nonce =
            bytes.get(header_len..header_len + NONCE_LEN).ok_or_else(damaged)?.try_into().expect("NONCE_LEN bytes");
        let ciphertext = &bytes[header_len + NONCE_LEN..];
        if ciphertext.len() < AES_256_GCM.tag_len() {
            return Err(damaged());
        }
        Ok(Sealed { header: &bytes[..header_len], derivation, nonce, ciphertext })
    }

    /// The AES key for a file made with `derivation`, stretching the passphrase only when the salt or
    /// iteration count is new to this store.
    fn key_for(&mut self, derivation: Derivation) -> Result<&LessSafeKey> {
        let kind = match derivation {
            Derivation::RawKey => KIND_RAW_KEY,
            Derivation::Pbkdf2 { .. } => KIND_PASSPHRASE,
        };
        if kind != self.key.kind() {
            let (file, given) = if kind == KIND_RAW_KEY {
                ("a 32-byte key", "a passphrase")
            } else {
                ("a passphrase", "a 32-byte key")
            };
            return Err(
                self.error(format_args!("cannot be decrypted: it was encrypted with {file}, and {given} was given"))
            );
        }
        if self.derived.as_ref().map(|(known, _)| *known) != Some(derivation) {
            let mut key_bytes = [0u8; TOKEN_FILE_KEY_BYTES];
            match (&self.key, derivation) {
                (TokenFileKey::Raw(raw), _) => key_bytes = *raw,
                (TokenFileKey::Passphrase(text), Derivation::Pbkdf2 { iterations, salt }) => ring::pbkdf2::derive(
                    ring::pbkdf2::PBKDF2_HMAC_SHA256,
                    iterations,
                    &salt,
                    text.as_bytes(),
                    &mut key_bytes,
                ),
                (TokenFileKey::Passphrase(_), Derivation::RawKey) => unreachable!("kinds compared above"),
            }
            let key = LessSafeKey::new(UnboundKey::new(&AES_256_GCM, &key_bytes).expect("32 bytes is an AES-256 key"));
            key_bytes.fill(0);
            self.derived = Some((derivation, key));
        }
        Ok(&self.derived.as_ref().expect("set above").1)
    }

    /// The derivation of a file this store creates: a fresh random salt for a passphrase.
    fn new_derivation(&self) -> Result<Derivation> {
        Ok(match self.key {
            TokenFileKey::Raw(_) => Derivation::RawKey,
            TokenFileKey::Passphrase(_) => {
                let mut salt = [0u8; SALT_BYTES];
                self.random.fill(&mut salt).map_err(|_| self.error("no random salt could be drawn from the OS"))?;
                let iterations = NonZeroU32::new(TOKEN_FILE_PBKDF2_ITERATIONS).expect("a positive constant");
                Derivation::Pbkdf2 { iterations, salt }
            }
        })
    }

    /// The file's bytes for `entries`: header, a fresh random nonce, the ciphertext and its tag.
    fn seal(&mut self, derivation: Derivation, entries: &Entries) -> Result<Vec<u8>> {
        let mut nonce = [0u8; NONCE_LEN];
        self.random.fill(&mut nonce).map_err(|_| self.error("no random nonce could be drawn from the OS"))?;
        let header = derivation.header();
        let mut sealed = header.clone();
        sealed.extend_from_slice(&nonce);
        let mut body = serde_json::to_vec(entries).expect("a string map serializes");
        self.key_for(derivation)?
            .seal_in_place_append_tag(Nonce::assume_unique_for_key(nonce), Aad::from(&header), &mut body)
            .map_err(|_| self.error("cannot be encrypted"))?;
        sealed.extend_from_slice(&body);
        Ok(sealed)
    }

    /// Replaces the file with `bytes` in one rename: a temporary file beside it (0600 on Unix,
    /// tempfile's default), flushed to disk first.
    fn write_atomically(&self, bytes: &[u8]) -> Result<()> {
        let directory = match self.path.parent() {
            Some(parent) if !parent.as_os_str().is_empty() => parent,
            _ => Path::new("."),
        };
        let fail = |e: std::io::Error| self.error(format_args!("cannot be written: {e}"));
        let mut temporary =
            tempfile::Builder::new().prefix(".mcpferry-tokens-").suffix(".tmp").tempfile_in(directory).map_err(fail)?;
        temporary.write_all(bytes).map_err(fail)?;
        temporary.as_file().sync_all().map_err(fail)?;
        temporary.persist(&self.path).map_err(|e| fail(e.error))?;
        // The rename itself is durable once the directory is flushed (not possible on Windows).
        #[cfg(unix)]
        std::fs::File::open(directory).and_then(|d| d.sync_all()).map_err(fail)?;
        Ok(())
    }

    /// The exclusive lock on `<file>.lock`, held until the guard drops: this store's claim's, when one
    /// holds it, else its own, tried again after a pause while another descriptor (another process, or
    /// another store on the file in this one) holds it, within twice a refresh's deadline (a claim holds
    /// it for at most one refresh). Never a wait in the kernel: this store's own claim may take the lock
    /// meanwhile, and its writes need this store.
    fn lock_exclusively(&self) -> Result<Arc<std::fs::File>> {
        let until = Instant::now() + Duration::from_millis(2 * OAUTH_REQUEST_TIMEOUT_MS);
        let mut pause = Duration::from_millis(TOKEN_CLAIM_POLL_MIN_MS);
        loop {
            let claimed = self.held.lock().file.clone();
            if let Some(held) = claimed {
                return Ok(held);
            }
            if let Some(own) = try_lock(&self.path)? {
                return Ok(Arc::new(own));
            }
            if Instant::now() + pause > until {
                return Err(self.error("cannot be written: another process holds its lock"));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(TOKEN_CLAIM_POLL_MAX_MS));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const RAW: [u8; 32] = [7; 32];
    const PASSPHRASE: &str = "correct horse battery staple";

    fn store(dir: &tempfile::TempDir, key: TokenFileKey) -> EncryptedFileTokenStore {
        EncryptedFileTokenStore::open(dir.path().join("tokens.bin"), key).unwrap()
    }

    fn storage_message(error: McpError) -> String {
        match error {
            McpError::Storage(message) => message,
            other => panic!("not a storage error: {other:?}"),
        }
    }

    async fn round_trip(key: TokenFileKey) {
        let dir = tempfile::tempdir().unwrap();
        let first = store(&dir, key.clone());
        assert_eq!(first.get("issuer-a").await.unwrap(), None);
        first.set("issuer-a", r#"{"access_token":"tok-AAAA"}"#).await.unwrap();
        first.set("issuer-b", "tok-BBBB").await.unwrap();
        first.delete("issuer-b").await.unwrap();
        first.delete("never-set").await.unwrap();
        // A second store on the same file (as after a restart) reads what the first wrote.
        let second = store(&dir, key);
        assert_eq!(second.get("issuer-a").await.unwrap().as_deref(), Some(r#"{"access_token":"tok-AAAA"}"#));
        assert_eq!(second.get("issuer-b").await.unwrap(), None);

        let on_disk = std::fs::read(dir.path().join("tokens.bin")).unwrap();
        assert!(on_disk.starts_with(MAGIC));
        for plaintext in [&b"tok-AAAA"[..], b"issuer-a", b"access_token", PASSPHRASE.as_bytes(), &RAW] {
            assert!(!on_disk.windows(plaintext.len()).any(|w| w == plaintext), "plaintext {plaintext:?} on disk");
        }
    }

    #[tokio::test]
    async fn raw_key_round_trip_leaves_no_plaintext() {
        round_trip(TokenFileKey::raw(&RAW).unwrap()).await;
    }

    #[tokio::test]
    async fn passphrase_round_trip_leaves_no_plaintext() {
        round_trip(TokenFileKey::passphrase(PASSPHRASE).unwrap()).await;
    }

    #[tokio::test]
    async fn every_write_uses_a_fresh_nonce() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir, TokenFileKey::raw(&RAW).unwrap());
        let nonce_of = || std::fs::read(dir.path().join("tokens.bin")).unwrap()[10..10 + NONCE_LEN].to_vec();
        store.set("k", "v").await.unwrap();
        let first = nonce_of();
        store.set("k", "v").await.unwrap();
        assert_ne!(first, nonce_of());
    }

    #[test]
    fn keys_of_the_wrong_shape_are_config_errors() {
        assert!(matches!(TokenFileKey::raw(&[1; 31]), Err(McpError::ConfigInvalid(_))));
        assert!(matches!(TokenFileKey::raw(&[1; 33]), Err(McpError::ConfigInvalid(_))));
        assert!(matches!(TokenFileKey::passphrase("elevenchars"), Err(McpError::ConfigInvalid(_))));
        assert!(TokenFileKey::passphrase("twelve chars").is_ok());
        assert!(matches!(
            EncryptedFileTokenStore::open("", TokenFileKey::raw(&RAW).unwrap()),
            Err(McpError::ConfigInvalid(_))
        ));
    }

    #[tokio::test]
    async fn a_wrong_key_fails_typed_and_leaves_the_file_alone() {
        let dir = tempfile::tempdir().unwrap();
        store(&dir, TokenFileKey::raw(&RAW).unwrap()).set("k", "tok-secret").await.unwrap();
        let before = std::fs::read(dir.path().join("tokens.bin")).unwrap();

        let wrong = store(&dir, TokenFileKey::raw(&[8; 32]).unwrap());
        let message = storage_message(wrong.get("k").await.unwrap_err());
        assert!(message.contains("the key is wrong, or the file was altered"), "{message}");
        assert!(!message.contains("tok-secret"), "{message}");
        let message = storage_message(wrong.set("k", "other").await.unwrap_err());
        assert!(message.contains("the key is wrong"), "{message}");
        assert_eq!(before, std::fs::read(dir.path().join("tokens.bin")).unwrap(), "a failed set rewrote the file");

        let passphrase = store(&dir, TokenFileKey::passphrase(PASSPHRASE).unwrap());
        let message = storage_message(passphrase.get("k").await.unwrap_err());
        assert!(message.contains("encrypted with a 32-byte key, and a passphrase was given"), "{message}");
    }

    #[tokio::test]
    async fn a_wrong_passphrase_fails_typed() {
        let dir = tempfile::tempdir().unwrap();
        store(&dir, TokenFileKey::passphrase(PASSPHRASE).unwrap()).set("k", "v").await.unwrap();
        let wrong = store(&dir, TokenFileKey::passphrase("correct horse battery stapler").unwrap());
        let message = storage_message(wrong.get("k").await.unwrap_err());
        assert!(message.contains("the key is wrong, or the file was altered"), "{message}");
        assert!(!message.contains("correct horse"), "{message}");
    }

    #[tokio::test]
    async fn any_flipped_byte_fails_typed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.bin");
        let key = TokenFileKey::raw(&RAW).unwrap();
        store(&dir, key.clone()).set("k", "v").await.unwrap();
        let good = std::fs::read(&path).unwrap();
        // Header (version, kind), nonce, ciphertext and tag: every region is covered by the tag.
        for index in [8, 9, 10, 10 + NONCE_LEN, good.len() - 1] {
            let mut bad = good.clone();
            bad[index] ^= 0x01;
            std::fs::write(&path, &bad).unwrap();
            let error = store(&dir, key.clone()).get("k").await.unwrap_err();
            assert!(matches!(error, McpError::Storage(_)), "byte {index}: {error:?}");
        }
        std::fs::write(&path, b"not a token file").unwrap();
        let message = storage_message(store(&dir, key).get("k").await.unwrap_err());
        assert!(message.contains("not an mcpferry token file"), "{message}");
    }

    #[tokio::test]
    async fn a_flipped_salt_byte_fails_typed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.bin");
        store(&dir, TokenFileKey::passphrase(PASSPHRASE).unwrap()).set("k", "v").await.unwrap();
        let mut bad = std::fs::read(&path).unwrap();
        bad[MAGIC.len() + 2 + 4] ^= 0x80; // the salt's first byte
        std::fs::write(&path, &bad).unwrap();
        let message =
            storage_message(store(&dir, TokenFileKey::passphrase(PASSPHRASE).unwrap()).get("k").await.unwrap_err());
        assert!(message.contains("the key is wrong, or the file was altered"), "{message}");
    }

    #[cfg(unix)]
    #[tokio::test]
    async fn the_file_is_private_to_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokens.bin");
        std::fs::write(&path, b"").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        std::fs::remove_file(&path).unwrap();
        store(&dir, TokenFileKey::raw(&RAW).unwrap()).set("k", "v").await.unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        let lock = dir.path().join("tokens.bin.lock");
        assert_eq!(std::fs::metadata(lock).unwrap().permissions().mode() & 0o777, 0o600);
        let leftovers: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
            .collect();
        assert!(leftovers.is_empty(), "temporary files left behind");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_writes_are_all_kept() {
        let dir = tempfile::tempdir().unwrap();
        let key = TokenFileKey::raw(&RAW).unwrap();
        // Two stores on one file stand for two processes: only the lock file orders their writes.
        let (a, b) = (Arc::new(store(&dir, key.clone())), Arc::new(store(&dir, key.clone())));
        let writes = (0..40).map(|i| {
            let store = if i % 2 == 0 { a.clone() } else { b.clone() };
            tokio::spawn(async move { store.set(&format!("key-{i}"), &format!("value-{i}")).await })
        });
        for write in writes.collect::<Vec<_>>() {
            write.await.unwrap().unwrap();
        }
        let check = store(&dir, key);
        for i in 0..40 {
            assert_eq!(check.get(&format!("key-{i}")).await.unwrap(), Some(format!("value-{i}")), "key-{i} lost");
        }
    }

    #[tokio::test]
    async fn the_claim_is_the_file_lock_one_holder_at_a_time_and_its_own_writes_go_on() {
        let dir = tempfile::tempdir().unwrap();
        let key = TokenFileKey::raw(&RAW).unwrap();
        // Two stores on one file stand for two processes: only the lock file stands between them.
        let (a, b) = (store(&dir, key.clone()), store(&dir, key));
        assert_eq!(a.identity().await.unwrap(), b.identity().await.unwrap());
        let held = a.lock_across_processes(Duration::from_secs(5)).await.unwrap().expect("a file store has a lock");
        let again =
            a.lock_across_processes(Duration::from_secs(5)).await.unwrap().expect("this store's claims share its lock");
        a.set("k", "written under the claim").await.unwrap();
        let refused = b.lock_across_processes(Duration::from_millis(30)).await.err().expect("the other store waits");
        assert!(storage_message(refused).contains("held its lock for longer than 30 ms"));
        drop(held);
        assert!(
            b.lock_across_processes(Duration::from_millis(30)).await.is_err(),
            "held while any claim of the store holds it"
        );
        drop(again);
        let taken = b.lock_across_processes(Duration::from_secs(5)).await.unwrap();
        assert!(taken.is_some());
        b.set("k", "the other store's turn").await.unwrap();
        assert_eq!(a.get("k").await.unwrap().as_deref(), Some("the other store's turn"));
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_child_process_never_inherits_the_held_lock() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir, TokenFileKey::raw(&RAW).unwrap());
        let _held = store.lock_across_processes(Duration::from_secs(5)).await.unwrap().unwrap();
        let mine = std::fs::read_dir("/proc/self/fd").unwrap().filter_map(|e| std::fs::read_link(e.ok()?.path()).ok());
        assert!(
            mine.into_iter().any(|target| target.ends_with("tokens.bin.lock")),
            "the claim holds the lock file open"
        );
        let child = std::process::Command::new("ls")
            .args(["-l", "/proc/self/fd"])
            .stdin(std::process::Stdio::inherit())
            .output()
            .unwrap();
        let fds = String::from_utf8_lossy(&child.stdout);
        assert!(child.status.success() && fds.contains("->"), "{fds}");
        assert!(!fds.contains("tokens.bin.lock"), "the child inherited the lock: {fds}");
    }

    #[tokio::test]
    async fn a_write_past_the_size_limit_is_refused_and_the_file_kept() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir, TokenFileKey::raw(&RAW).unwrap());
        store.set("small", "v").await.unwrap();
        let huge = "x".repeat(TOKEN_FILE_MAX_BYTES as usize);
        let message = storage_message(store.set("huge", &huge).await.unwrap_err());
        assert!(message.contains("the value was not stored"), "{message}");
        assert_eq!(store.get("small").await.unwrap().as_deref(), Some("v"));
        assert_eq!(store.get("huge").await.unwrap(), None);
    }

    #[test]
    fn a_relative_path_is_fixed_when_the_store_is_opened() {
        let store = EncryptedFileTokenStore::open("tokens.bin", TokenFileKey::raw(&RAW).unwrap()).unwrap();
        assert_eq!(store.path(), std::env::current_dir().unwrap().join("tokens.bin"));
    }

    #[test]
    fn debug_shows_neither_key_nor_value() {
        let dir = tempfile::tempdir().unwrap();
        let shown = format!(
            "{:?} {:?}",
            store(&dir, TokenFileKey::passphrase(PASSPHRASE).unwrap()),
            TokenFileKey::raw(&RAW).unwrap()
        );
        assert!(!shown.contains("correct horse") && !shown.contains("7, 7"), "{shown}");
        assert!(shown.contains("passphrase"), "{shown}");
    }
}
