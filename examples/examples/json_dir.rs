//! A directory of JSON files (`NAME.json`, such as `{"team": "blue"}`) mirrored into an informer
//! with a `team` index: `cargo run -p kcache-demo --example json_dir [DIR]` (default
//! `examples/json`), then add, edit or delete files in DIR and watch the index follow.
use futures::StreamExt;
use kcache_core::{Object, ResourceVersion as Rv, SetResourceVersion};
use kcache_indexer::Indexers;
use kcache_informer::{InformerOptions, SharedIndexInformer};
use kcache_reflector::{content_fingerprint, PollingListWatcher};
use std::{collections::BTreeSet, env, fs, future, io, path::PathBuf, sync::Arc, time::Duration};

/// One file: its name without `.json`, its content, and the version the poller stamps into it
/// (a hash of the content: the files carry no version of their own).
struct Doc {
    name: String,
    json: serde_json::Value,
    rv: Rv,
}
impl Object for Doc {
    fn namespace(&self) -> Option<&str> {
        None
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn resource_version(&self) -> Rv {
        self.rv.clone()
    }
}
impl SetResourceVersion for Doc {
    fn set_resource_version(&mut self, rv: Rv) {
        self.rv = rv;
    }
}

fn read_dir(dir: &PathBuf) -> io::Result<Vec<Doc>> {
    let mut docs = Vec::new();
    for path in fs::read_dir(dir)?.map(|entry| entry.map(|e| e.path())) {
        let path = path?;
        let json = serde_json::from_slice(&fs::read(&path)?)?;
        let stem = path.file_stem().unwrap_or_default().to_string_lossy();
        docs.push(Doc {
            name: stem.into(),
            json,
            rv: Rv::default(),
        });
    }
    Ok(docs)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = PathBuf::from(env::args().nth(1).unwrap_or("examples/json".into()));
    let lw = PollingListWatcher::new(move || future::ready(read_dir(&dir)))
        .period(Duration::from_millis(500))
        .content_hash(|doc: &Doc| content_fingerprint(&doc.json.to_string()));
    let team = |doc: &Doc| Ok(vec![doc.json["team"].as_str().unwrap_or("").to_owned()]);
    let options = InformerOptions::new().indexers(Indexers::new().with("team", team));
    let informer = Arc::new(SharedIndexInformer::with_options(lw, options));
    let (mut events, running) = (informer.event_stream()?, informer.clone());
    let run = tokio::spawn(async move { running.run(future::pending()).await });
    while let Some(doc) = events.next().await.and_then(|e| e.object().cloned()) {
        let team = doc.json["team"].as_str().unwrap_or("");
        let members = informer.indexer().by_index("team", team)?;
        let names: BTreeSet<_> = members.iter().map(|d| d.name.as_str()).collect();
        let files = informer.indexer().list().len();
        println!(
            "{files} files; {} changed; team {team}: {names:?}",
            doc.name
        );
    }
    Ok(run.await??)
}
