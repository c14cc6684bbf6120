"""walpages.py DB [OFFSET SALT]: count the WAL frames of DB after OFFSET
(all of them if the WAL restarted since SALT was read) by the b-tree
each page belongs to (SQLite's dbstat on a copy). Used by walrun.sh."""
import struct,sys,subprocess,collections
db=sys.argv[1]; wal=db+'-wal'
data=open(wal,'rb').read()
magic,ver,psz,ckpt,s1,s2,c1,c2=struct.unpack('>IIIIIIII',data[:32])
start=int(sys.argv[2]) if len(sys.argv)>2 else 32
salt0=sys.argv[3] if len(sys.argv)>3 else ''
off=32; frames=[]
if salt0 and salt0!='%08x%08x'%(s1,s2): start=32
print('restart' if start==32 else 'same wal'); commits=0; per=[]; cur=0
while off+24+psz<=len(data):
    pg,commit=struct.unpack('>II',data[off:off+8])
    fs1,fs2=struct.unpack('>II',data[off+8:off+16])
    if (fs1,fs2)!=(s1,s2): break
    if off>=start:
        frames.append(pg); cur+=1
        if commit: commits+=1; per.append(cur); cur=0
    off+=24+psz
print('frames',len(frames),'commits',commits,'avg pages/commit %.1f'%(sum(per)/max(1,len(per))))
import shutil,tempfile
d=tempfile.mkdtemp(); shutil.copy(db,d+'/c.db'); shutil.copy(wal,d+'/c.db-wal')
out=subprocess.run(['sqlite3',d+'/c.db','SELECT pageno,name FROM dbstat'],capture_output=True,text=True).stdout
m={}
for line in out.splitlines():
    p,n=line.split('|',1); m[int(p)]=n
c=collections.Counter(m.get(p,'?') for p in frames)
for n,k in c.most_common(30): print('%7d %6.2f/commit %s'%(k,k/max(1,commits),n))
