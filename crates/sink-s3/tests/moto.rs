//! moto's S3 server (`sinks_testkit::Moto`, the second S3 implementation of the table's
//! end-to-end test) keeps the one promise the table's log commits and the batch manifests
//! stand on: a conditional create (`PutMode::Create`, `If-None-Match: *`) of a key that
//! exists fails with `AlreadyExists` and leaves the first body, one after the other and when
//! several creates of one key race.

use std::sync::Arc;

use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions};
use sinks_testkit::{Moto, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY, cannot_run};

async fn store(moto: &Moto) -> AmazonS3 {
    let bucket = moto.bucket().await.unwrap_or_else(|e| panic!("{e}"));
    AmazonS3Builder::new()
        .with_endpoint(moto.endpoint())
        .with_allow_http(true)
        .with_region("us-east-1")
        .with_bucket_name(bucket)
        .with_access_key_id(S3_ACCESS_KEY_ID)
        .with_secret_access_key(S3_SECRET_ACCESS_KEY)
        .build()
        .unwrap_or_else(|e| panic!("{e}"))
}

async fn create(store: &AmazonS3, key: &Path, body: &'static [u8]) -> object_store::Result<()> {
    let options = PutOptions { mode: PutMode::Create, ..Default::default() };
    store.put_opts(key, body.into(), options).await.map(drop)
}

#[tokio::test]
async fn a_second_conditional_create_of_a_key_fails_with_already_exists_on_moto() {
    let moto = Moto::start().await.unwrap_or_else(|e| cannot_run("moto", e));
    let store = store(&moto).await;
    let key = Path::from("_delta_log/00000000000000000000.json");
    create(&store, &key, b"first").await.unwrap_or_else(|e| panic!("the first create: {e}"));
    let second = create(&store, &key, b"second").await;
    assert!(matches!(second, Err(object_store::Error::AlreadyExists { .. })), "the second create: {second:?}");
    let body = store.get(&key).await.unwrap().bytes().await.unwrap();
    assert_eq!(&body[..], b"first", "the first body stays");
}

/// 16 writers race to create each of 60 keys: exactly one wins each, the others see
/// `AlreadyExists`, and the key holds the winner's body.
#[tokio::test]
async fn racing_conditional_creates_of_one_key_have_one_winner_on_moto() {
    const BODIES: [&[u8]; 16] =
        [b"0", b"1", b"2", b"3", b"4", b"5", b"6", b"7", b"8", b"9", b"10", b"11", b"12", b"13", b"14", b"15"];
    let moto = Moto::start().await.unwrap_or_else(|e| cannot_run("moto", e));
    let store = Arc::new(store(&moto).await);
    for round in 0..60 {
        let key = Path::from(format!("_delta_log/{round:020}.json"));
        let racers = BODIES.iter().map(|body| {
            let (store, key) = (Arc::clone(&store), key.clone());
            tokio::spawn(async move { create(&store, &key, body).await.map(|()| *body) })
        });
        let mut winners = Vec::new();
        for racer in futures::future::join_all(racers).await {
            match racer.unwrap() {
                Ok(body) => winners.push(body),
                Err(object_store::Error::AlreadyExists { .. }) => {}
                Err(e) => panic!("round {round}: a create failed otherwise: {e}"),
            }
        }
        assert_eq!(winners.len(), 1, "round {round}: one create wins, not {winners:?}");
        let body = store.get(&key).await.unwrap().bytes().await.unwrap();
        assert_eq!(&body[..], winners[0], "round {round}: the key holds the winner's body");
    }
}
