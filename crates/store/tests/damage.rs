//! Damaged logs and snapshots: recovery either keeps every acknowledged
//! record or refuses to start, naming the file and the byte offset; with the
//! repair option it keeps the valid prefix and moves the rest aside, deleting
//! nothing. Includes an exhaustive fuzz over every byte of a small two-segment
//! log (flipped, cut out, truncated at).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use store::file::FileOptions;
use store::{Engine, EngineConfig, FileStore, KeyValue, Op, RangeRequest, Revision, Store, Txn};
use tempfile::TempDir;

/// A scratch directory, in memory if `/dev/shm` is there: the fuzz opens a
/// store thousands of times and torn-tail repair fsyncs.
fn scratch() -> TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir()
        && let Ok(d) = tempfile::tempdir_in(shm)
    {
        return d;
    }
    tempfile::tempdir().unwrap()
}

fn no_snapshots() -> FileOptions {
    FileOptions {
        snapshot_log_bytes: u64::MAX,
        background_snapshots: false,
        lock_timeout: Duration::from_millis(200),
        // These tests take the log apart frame by frame: no reserved room
        // after the records (`reserved_room_*` below cover it).
        preallocate_bytes: 0,
        ..FileOptions::default()
    }
}

fn repairing() -> FileOptions {
    FileOptions {
        repair: true,
        ..no_snapshots()
    }
}

fn open(dir: &Path, opts: FileOptions) -> std::io::Result<Engine> {
    FileStore::open_with_options(dir, EngineConfig::default(), opts)
}

async fn dump(s: &Engine) -> Vec<KeyValue> {
    s.range(RangeRequest::default()).await.unwrap().kvs
}

fn files(dir: &Path, prefix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_str().unwrap().starts_with(prefix))
        .collect();
    v.sort();
    v
}

fn name(p: &Path) -> String {
    p.file_name().unwrap().to_string_lossy().into_owned()
}

fn segment_name(start: Revision) -> String {
    format!("wal-{start:020}.log")
}

/// One frame of a segment as the test sees it: byte range and revisions.
#[derive(Clone, Copy, Debug)]
struct Frame {
    start: usize,
    end: usize,
    first: Revision,
    last: Revision,
}

/// Parses a pristine segment: `len:u32 crc:u32` then `format:u8 count:u32`
/// and commits that start with their `revision:i64`.
fn frames_of(data: &[u8]) -> Vec<Frame> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < data.len() {
        let len = u32::from_le_bytes(data[pos..pos + 4].try_into().unwrap()) as usize;
        let p = pos + 8;
        let count = u32::from_le_bytes(data[p + 1..p + 5].try_into().unwrap()) as i64;
        let first = i64::from_le_bytes(data[p + 5..p + 13].try_into().unwrap());
        out.push(Frame {
            start: pos,
            end: p + len,
            first,
            last: first + count - 1,
        });
        pos = p + len;
    }
    assert_eq!(pos, data.len());
    out
}

/// Writes `n` single-key batches, one at a time; returns the store's state
/// after every revision (index = revision).
async fn write_sequential(s: &Engine, n: usize) -> Vec<Vec<KeyValue>> {
    for i in 0..n {
        s.create(&format!("/obj/{i:03}"), Bytes::from(format!("value-{i}")))
            .await
            .unwrap();
    }
    states(s).await
}

/// The state at every revision from 0 to the current one, read back through
/// the store's history.
async fn states(s: &Engine) -> Vec<Vec<KeyValue>> {
    let mut out = Vec::new();
    for rev in 0..=s.current_revision() {
        let r = s
            .range(RangeRequest {
                revision: Some(rev),
                ..Default::default()
            })
            .await
            .unwrap();
        out.push(r.kvs);
    }
    out
}

fn assert_names_damage(err: &std::io::Error, file: &str) {
    let msg = err.to_string();
    assert_eq!(err.kind(), std::io::ErrorKind::InvalidData, "{msg}");
    assert!(msg.contains(file), "the error does not name {file}: {msg}");
    assert!(msg.contains("offset"), "the error names no offset: {msg}");
}

/// The scenario: one length field in the middle of the log damaged to
/// point past the end of the file. Today's code took it for a torn tail and
/// truncated half the objects away with only a warning.
#[tokio::test]
async fn damaged_length_mid_log_stops_the_start_and_keeps_the_file() {
    let dir = scratch();
    {
        let s = open(dir.path(), no_snapshots()).unwrap();
        write_sequential(&s, 20).await;
    }
    let seg = files(dir.path(), "wal-").pop().unwrap();
    let mut data = fs::read(&seg).unwrap();
    let frames = frames_of(&data);
    let mid = frames[10].start;
    data[mid..mid + 4].copy_from_slice(&(u32::MAX / 4).to_le_bytes());
    fs::write(&seg, &data).unwrap();

    let err = open(dir.path(), no_snapshots())
        .err()
        .expect("open must fail");
    assert_names_damage(&err, &name(&seg));
    let msg = err.to_string();
    assert!(msg.contains(&format!("byte offset {mid}")), "{msg}");
    assert!(msg.contains("repair"), "{msg}");
    assert_eq!(fs::read(&seg).unwrap(), data, "nothing was truncated");
    assert!(files(dir.path(), "damaged-").is_empty());
}

/// With the repair option the valid prefix is served, the damaged bytes are
/// in `damaged-*/` byte for byte, and the store takes writes again.
#[tokio::test]
async fn repair_keeps_the_prefix_and_moves_the_rest_aside() {
    let dir = scratch();
    let states = {
        let s = open(dir.path(), no_snapshots()).unwrap();
        write_sequential(&s, 20).await
    };
    let seg = files(dir.path(), "wal-").pop().unwrap();
    let mut data = fs::read(&seg).unwrap();
    let frames = frames_of(&data);
    let bad = frames[10];
    data[bad.start + 20] ^= 0x40; // inside the record: a checksum mismatch
    fs::write(&seg, &data).unwrap();

    let kept = bad.first - 1;
    {
        let s = open(dir.path(), repairing()).unwrap();
        assert_eq!(s.current_revision(), kept);
        assert_eq!(dump(&s).await, states[kept as usize]);
        let kv = s.create("/after-repair", Bytes::from("x")).await.unwrap();
        assert_eq!(kv.mod_revision, kept + 1);
    }
    let damaged = files(dir.path(), "damaged-");
    assert_eq!(damaged.len(), 1, "{damaged:?}");
    let moved = files(&damaged[0], "wal-");
    assert_eq!(moved.len(), 1, "{moved:?}");
    assert_eq!(
        name(&moved[0]),
        format!("{}.from-offset-{}", name(&seg), bad.start)
    );
    assert_eq!(fs::read(&moved[0]).unwrap(), data[bad.start..]);
    // The segment holds the prefix, then the new write.
    assert_eq!(fs::read(&seg).unwrap()[..bad.start], data[..bad.start]);

    // An ordinary open afterwards sees a healthy log.
    let s = open(dir.path(), no_snapshots()).unwrap();
    assert_eq!(s.current_revision(), kept + 1);
    assert!(s.get("/after-repair", None).await.unwrap().0.is_some());
}

/// Splits the only segment in `dir` in two at frame `at`, as a rotation
/// would have; returns the two paths.
fn split_segment(dir: &Path, at: usize) -> (PathBuf, PathBuf) {
    let seg = files(dir, "wal-").pop().unwrap();
    let data = fs::read(&seg).unwrap();
    let frames = frames_of(&data);
    let cut = frames[at];
    let first = dir.join(segment_name(frames[0].first));
    let second = dir.join(segment_name(cut.first));
    assert_eq!(seg, first);
    fs::write(&first, &data[..cut.start]).unwrap();
    fs::write(&second, &data[cut.start..]).unwrap();
    (first, second)
}

/// Damage in a sealed segment fails the start too; repair moves the later
/// segments whole, since their commits cannot be replayed without the lost
/// ones.
#[tokio::test]
async fn sealed_segment_damage_is_an_error_and_repair_moves_later_segments() {
    let dir = scratch();
    let states = {
        let s = open(dir.path(), no_snapshots()).unwrap();
        write_sequential(&s, 12).await
    };
    let (first, second) = split_segment(dir.path(), 6);
    let second_bytes = fs::read(&second).unwrap();
    let mut data = fs::read(&first).unwrap();
    let frames = frames_of(&data);
    // The last frame of the sealed segment, cut short by one byte: a torn
    // tail anywhere but in the last segment is damage.
    let last = *frames.last().unwrap();
    data.truncate(data.len() - 1);
    fs::write(&first, &data).unwrap();

    let err = open(dir.path(), no_snapshots()).err().expect("must fail");
    assert_names_damage(&err, &name(&first));
    assert!(err.to_string().contains("later segment"), "{err}");

    let s = open(dir.path(), repairing()).unwrap();
    assert_eq!(s.current_revision(), last.first - 1);
    assert_eq!(dump(&s).await, states[(last.first - 1) as usize]);
    drop(s);
    let damaged = files(dir.path(), "damaged-").pop().unwrap();
    assert_eq!(fs::read(damaged.join(name(&second))).unwrap(), second_bytes);
    assert!(!second.exists());
    assert_eq!(fs::metadata(&first).unwrap().len(), last.start as u64);
}

/// A sealed segment truncated exactly at a frame boundary leaves a gap in
/// the revisions: the error names both segments.
#[tokio::test]
async fn gap_between_segments_is_an_error() {
    let dir = scratch();
    {
        let s = open(dir.path(), no_snapshots()).unwrap();
        write_sequential(&s, 8).await;
    }
    let (first, second) = split_segment(dir.path(), 4);
    let data = fs::read(&first).unwrap();
    let frames = frames_of(&data);
    fs::write(&first, &data[..frames[3].start]).unwrap();
    let err = open(dir.path(), no_snapshots()).err().expect("must fail");
    assert_names_damage(&err, &name(&second));
    assert!(err.to_string().contains(&name(&first)), "{err}");
}

/// A crash that cuts short a batch whose value is itself a complete frame
/// is reported (the embedded frame looks like acknowledged data after a bad
/// record); repair recovers every acknowledged record and moves the torn
/// batch aside.
#[tokio::test]
async fn torn_batch_containing_a_frame_needs_repair_and_loses_nothing() {
    let dir = scratch();
    let (states, fake) = {
        let s = open(dir.path(), no_snapshots()).unwrap();
        let states = write_sequential(&s, 3).await;
        let seg = files(dir.path(), "wal-").pop().unwrap();
        (states, fs::read(&seg).unwrap())
    };
    // A fourth batch whose value is the whole log so far (complete frames),
    // then cut short.
    let seg = files(dir.path(), "wal-").pop().unwrap();
    {
        let s = open(dir.path(), no_snapshots()).unwrap();
        s.create("/evil", Bytes::from(fake.clone())).await.unwrap();
    }
    let data = fs::read(&seg).unwrap();
    let good = fake.len();
    fs::write(&seg, &data[..data.len() - 10]).unwrap();

    let err = open(dir.path(), no_snapshots()).err().expect("must fail");
    assert_names_damage(&err, &name(&seg));
    let s = open(dir.path(), repairing()).unwrap();
    assert_eq!(s.current_revision(), 3);
    assert_eq!(dump(&s).await, states[3]);
    drop(s);
    let damaged = files(dir.path(), "damaged-").pop().unwrap();
    let moved = files(&damaged, "wal-").pop().unwrap();
    assert_eq!(fs::read(moved).unwrap(), data[good..data.len() - 10]);
}

/// Snapshot damage: when the log cannot make up for the snapshot, `open`
/// fails naming the snapshot and an offset. Before, a damaged snapshot with
/// no log after it opened as an empty store.
#[tokio::test]
async fn damaged_snapshot_is_named_and_never_opens_empty() {
    let dir = scratch();
    let snap_every_batch = FileOptions {
        snapshot_log_bytes: 1,
        ..no_snapshots()
    };
    let final_state = {
        let s = open(dir.path(), snap_every_batch).unwrap();
        write_sequential(&s, 10).await;
        // A snapshot is taken once the segment outgrows the last snapshot:
        // a last write bigger than the whole state makes one certain.
        s.create("/big", Bytes::from(vec![b'b'; 4096]))
            .await
            .unwrap();
        dump(&s).await
    };
    let snap = files(dir.path(), "snap-").pop().unwrap();
    assert!(
        files(dir.path(), "wal-").is_empty(),
        "only the snapshot is left"
    );
    let pristine = fs::read(&snap).unwrap();
    {
        let s = open(dir.path(), no_snapshots()).unwrap();
        assert_eq!(dump(&s).await, final_state);
        // Opening needs no free space: no new segment until a write.
        assert!(files(dir.path(), "wal-").is_empty());
    }

    // Every single-byte flip of the snapshot, with and without a log after
    // it, fails the start naming the snapshot; repair cannot help.
    for with_log in [false, true] {
        let case = scratch();
        fs::write(case.path().join(name(&snap)), &pristine).unwrap();
        if with_log {
            let s = open(case.path(), no_snapshots()).unwrap();
            s.create("/later", Bytes::from("1")).await.unwrap();
        }
        let segs: Vec<(PathBuf, Vec<u8>)> = files(case.path(), "wal-")
            .into_iter()
            .map(|p| {
                let d = fs::read(&p).unwrap();
                (p, d)
            })
            .collect();
        for pos in 0..pristine.len() {
            let mut data = pristine.clone();
            data[pos] ^= 0x01;
            let d = scratch();
            fs::write(d.path().join(name(&snap)), &data).unwrap();
            for (p, bytes) in &segs {
                fs::write(d.path().join(name(p)), bytes).unwrap();
            }
            for opts in [no_snapshots(), repairing()] {
                let err = open(d.path(), opts)
                    .err()
                    .unwrap_or_else(|| panic!("flip at {pos} (log {with_log}) opened"));
                assert_names_damage(&err, &name(&snap));
            }
        }
    }
}

/// Which kind of damage a fuzz case does.
#[derive(Clone, Copy, Debug)]
enum Harm {
    Flip(u8),
    CutOut,
    TruncateAt,
}

/// Exhaustive fuzz: a two-segment log of batches with one and several
/// commits; at every byte of either segment, three bit flips, deleting the
/// byte, and truncating there. After each, `open` must fail naming the file
/// and an offset, or recover exactly an acceptable state:
/// - flips and cut-outs lose nothing, except that damage inside the last
///   frame of the last segment may lose that frame (it is what a crash
///   mid-write leaves);
/// - a truncation in the last segment must recover (it is what a crash
///   leaves) exactly the frames before the cut; nothing on disk can tell a
///   truncation at a frame boundary from a log that ended there. In a sealed
///   segment it must fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fuzz_every_byte_of_a_damaged_log() {
    let started = Instant::now();
    let pristine = scratch();
    let states = {
        let s = open(pristine.path(), no_snapshots()).unwrap();
        for round in 0..6 {
            // One-commit batches: a create and an update with a delete.
            let key = format!("/f/{round}");
            let kv = s.create(&key, Bytes::from("a")).await.unwrap();
            s.txn(Txn {
                conditions: vec![],
                ops: vec![
                    Op::Put {
                        key: key.clone(),
                        value: Bytes::from("b"),
                    },
                    Op::Delete {
                        key: format!("/f/{}", round + 100),
                    },
                ],
            })
            .await
            .unwrap();
            let _ = kv;
            // Several commits in one batch, usually one frame.
            let writes = (0..3).map(|i| {
                let s = s.clone();
                async move {
                    s.create(&format!("/g/{round}/{i}"), Bytes::from("c"))
                        .await
                        .unwrap()
                }
            });
            futures::future::join_all(writes).await;
            if round == 2 {
                s.delete(&key, None).await.unwrap();
            }
        }
        states(&s).await
    };
    let final_rev = (states.len() - 1) as Revision;
    let whole = fs::read(files(pristine.path(), "wal-").pop().unwrap()).unwrap();
    let frame_count = frames_of(&whole).len();
    assert!(
        frame_count >= 8,
        "too few frames to mean anything: {frame_count}"
    );
    let (first, second) = split_segment(pristine.path(), frame_count / 2);
    let segs = [
        (name(&first), fs::read(&first).unwrap()),
        (name(&second), fs::read(&second).unwrap()),
    ];
    let frames = [frames_of(&segs[0].1), frames_of(&segs[1].1)];
    assert!(frames[1].len() >= 2);
    println!(
        "fuzzing {} + {} bytes, {} frames, {} revisions",
        segs[0].1.len(),
        segs[1].1.len(),
        frame_count,
        final_rev
    );

    let work = scratch();
    let mut cases = 0;
    let (mut refused, mut recovered) = (0, 0);
    for (which, (file, bytes)) in segs.iter().enumerate() {
        let is_last = which == 1;
        for pos in 0..bytes.len() {
            let frame = frames[which]
                .iter()
                .find(|f| f.start <= pos && pos < f.end)
                .copied()
                .unwrap();
            let in_last_frame = is_last && frame.end == bytes.len();
            for harm in [
                Harm::Flip(0x01),
                Harm::Flip(0x80),
                Harm::Flip(0xFF),
                Harm::CutOut,
                Harm::TruncateAt,
            ] {
                let mut damaged = bytes.clone();
                match harm {
                    Harm::Flip(bits) => damaged[pos] ^= bits,
                    Harm::CutOut => {
                        damaged.remove(pos);
                    }
                    Harm::TruncateAt => damaged.truncate(pos),
                }
                // The acceptable recovered revisions.
                let acceptable: Vec<Revision> = match harm {
                    Harm::TruncateAt if is_last => {
                        let kept = frames[1]
                            .iter()
                            .filter(|f| f.end <= pos)
                            .map(|f| f.last)
                            .next_back()
                            .unwrap_or(frames[1][0].first - 1);
                        vec![kept]
                    }
                    Harm::TruncateAt => vec![],
                    _ if in_last_frame => vec![final_rev, frame.first - 1],
                    _ => vec![final_rev],
                };
                let dir = work.path().join(format!("case-{cases}"));
                cases += 1;
                fs::create_dir(&dir).unwrap();
                for (i, (n, b)) in segs.iter().enumerate() {
                    fs::write(dir.join(n), if i == which { &damaged } else { b }).unwrap();
                }
                let what = format!("{harm:?} at {file}:{pos}");
                match open(&dir, no_snapshots()) {
                    Err(e) => {
                        assert!(
                            !(matches!(harm, Harm::TruncateAt) && is_last),
                            "{what}: a truncated last segment must recover: {e}"
                        );
                        assert_names_damage(&e, file);
                        assert!(e.to_string().contains("repair"), "{what}: {e}");
                        refused += 1;
                    }
                    Ok(s) => {
                        let rev = s.current_revision();
                        assert!(
                            acceptable.contains(&rev),
                            "{what}: recovered revision {rev}, acceptable {acceptable:?}"
                        );
                        assert_eq!(dump(&s).await, states[rev as usize], "{what}: wrong state");
                        recovered += 1;
                    }
                }
                fs::remove_dir_all(&dir).unwrap();
            }
        }
    }
    println!(
        "{cases} damaged logs: {refused} refused, {recovered} recovered, {:?}",
        started.elapsed()
    );
    assert!(refused > cases / 2 && recovered > 0);
}

/// Repair over the same kind of damage never deletes anything: every byte of
/// the original segment is either still in the log or in `damaged-*/`.
#[tokio::test]
async fn repair_deletes_nothing() {
    let pristine = scratch();
    {
        let s = open(pristine.path(), no_snapshots()).unwrap();
        write_sequential(&s, 10).await;
    }
    let seg = files(pristine.path(), "wal-").pop().unwrap();
    let data = fs::read(&seg).unwrap();
    let frames = frames_of(&data);
    let mut checked = BTreeMap::new();
    for pos in (0..frames[8].start).step_by(7) {
        let case = scratch();
        let mut damaged = data.clone();
        damaged[pos] ^= 0x10;
        let path = case.path().join(name(&seg));
        fs::write(&path, &damaged).unwrap();
        let s = open(case.path(), repairing()).unwrap();
        let rev = s.current_revision();
        drop(s);
        // Damage in the first frame moves the whole segment.
        let kept = fs::read(&path).unwrap_or_default();
        let moved_dir = files(case.path(), "damaged-").pop().unwrap();
        let moved = fs::read(files(&moved_dir, "wal-").pop().unwrap()).unwrap();
        assert_eq!([kept, moved].concat(), damaged, "flip at {pos}");
        checked.insert(pos, rev);
    }
    assert!(checked.len() > 10);
}
